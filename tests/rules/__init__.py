"""The pure rules of scheduler/rules: tables of rows, no database in the rule."""
