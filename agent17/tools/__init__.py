"""Tools a model can call: the leased task tools and, per role, the rest."""
