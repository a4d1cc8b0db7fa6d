"""The live page: its routes and token (`page`) and what it reads at each request (`view`)."""
