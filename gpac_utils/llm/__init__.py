"""The LLM side: generation with a thinking and a non-thinking model, grading, uncertainty
scores and benchmark loaders. Nothing in the core (:mod:`gpac_utils`) imports from here."""
