# Runs once in the interpreter a warm image is taken from, after the prelude. Every sandbox
# started from the image has these modules imported already. It leaves no names in __main__,
# no open files, and no garbage, and freezes what is left so the collector never writes to
# (and so never un-shares) the image's pages.
def __code_sandbox_warm_up():
    import gc
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    for mod in WARM_EXTRA:
        __import__(mod)
    os.chdir("/home/user")
    gc.collect()
    gc.freeze()


WARM_EXTRA = ()
__code_sandbox_warm_up()
del __code_sandbox_warm_up, WARM_EXTRA
