

# Data files the runtime's packages read at run time that its build left out (scikit-learn's
# sample images, statsmodels' datasets, reportlab's fonts): the server unpacks them from the
# same versions' wheels into /usr/local/lib/package-data (src/runtime/package_data.rs); here
# each package is pointed there as it is imported.
def __code_sandbox_package_data():
    import os

    root = "/usr/local/lib/package-data"
    zipped = "/usr/local/lib/python315.zip/"

    def sklearn_datasets(module):
        # sklearn.datasets.images, a package of its own, is found beside the zipped ones.
        here = os.path.join(root, "sklearn", "datasets")
        if os.path.isdir(here):
            module.__path__.append(here)

    def statsmodels_utils(module):
        load_csv = module.load_csv

        def load_csv_unzipped(base_file, csv_name, sep=",", convert_float=False):
            # Each dataset reads its CSV beside its own module, which is in the zip.
            if isinstance(base_file, str) and base_file.startswith(zipped):
                base_file = os.path.join(root, base_file[len(zipped) :])
            return load_csv(base_file, csv_name, sep=sep, convert_float=convert_float)

        load_csv_unzipped.__doc__ = load_csv.__doc__
        module.load_csv = load_csv_unzipped

    def reportlab_config(module):
        fonts = os.path.join(root, "reportlab", "fonts")
        for name in ("T1SearchPath", "TTFSearchPath"):
            paths = getattr(module, name, None)
            if isinstance(paths, (list, tuple)) and fonts not in paths:
                setattr(module, name, type(paths)([*paths, fonts]))

    after_import = __code_sandbox_after_import__
    after_import("sklearn.datasets", sklearn_datasets)
    after_import("statsmodels.datasets.utils", statsmodels_utils)
    after_import("reportlab.rl_config", reportlab_config)


__code_sandbox_package_data()
del __code_sandbox_package_data
