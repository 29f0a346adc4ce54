"""The pytest regression (``make test``): one ``test_<block>.py`` per block plus the tools', with
``amsim.py`` (amaranth.sim helpers) and ``fuzz.py`` (hypothesis strategies). Not installed."""
