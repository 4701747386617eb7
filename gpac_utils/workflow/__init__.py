"""Running the compendium: repository-rooted paths, per-notebook configuration and the
papermill runner. Nothing in the core (:mod:`gpac_utils`) imports from here."""
