"""The steps that plan a SELECT of each kind (rewriter.RULES says which, in which order)."""
