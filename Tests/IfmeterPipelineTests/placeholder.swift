// Pipeline tests: see the other files.
