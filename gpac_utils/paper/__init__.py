"""The paper's own code: table builders, simulated stand-ins, theory experiments, the toy
population and figure helpers. Nothing in the core (:mod:`gpac_utils`) imports from here."""
