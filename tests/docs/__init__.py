"""Tests of the documentation: the site, its generated references, the versions it quotes."""
