"""What people and programs meet: each surface in a folder, what all surfaces share here."""
