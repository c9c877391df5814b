

# Changes made to a module as it is imported, before any importer sees it (numpy's native
# integers, the data files the runtime's build left out): `__code_sandbox_after_import__(name,
# change)` runs `change(module)` once, now if the module is imported already, else when it is.
def __code_sandbox_after_import():
    import builtins
    import sys

    changes = {}
    done = "__code_sandbox_changed__"

    def apply(name, module):
        seen = module.__dict__.setdefault(done, set())
        for change in changes.get(name, ()):
            if change not in seen:
                seen.add(change)
                change(module)

    class Loader:
        def __init__(self, inner):
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            self.inner.exec_module(module)
            module.__spec__.loader = module.__loader__ = self.inner
            apply(module.__name__, module)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    class AfterImportFinder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name not in changes:
                return None
            import importlib.util

            sys.meta_path.remove(AfterImportFinder)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, AfterImportFinder)
            if spec is not None and spec.loader is not None:
                spec.loader = Loader(spec.loader)
            return spec

    def after_import(name, change):
        changes.setdefault(name, []).append(change)
        module = sys.modules.get(name)
        if module is not None:
            apply(name, module)

    sys.meta_path.insert(0, AfterImportFinder)
    builtins.__code_sandbox_after_import__ = after_import


if not hasattr(__builtins__, "__code_sandbox_after_import__"):
    __code_sandbox_after_import()
del __code_sandbox_after_import
