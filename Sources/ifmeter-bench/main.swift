print("bench: not yet written")
