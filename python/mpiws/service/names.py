"""A service function named so that another process finds it: ``NAME=module:function``
(``mpiws serve --service``), read here (``load``) and written (``spec``) for the
processes that run instances (``sandbox``)."""

import importlib
import os
import sys


def load(spec):
    """``NAME=module:function`` -> (NAME, function)."""
    name, sep, target = spec.partition("=")
    module, sep2, attr = target.partition(":")
    if not (sep and sep2 and name and module and attr):
        raise ValueError(f"service must be NAME=module:function, got {spec!r}")
    if os.getcwd() not in sys.path:  # like `python -m`: modules beside you import
        sys.path.insert(0, os.getcwd())
    fn = getattr(importlib.import_module(module), attr)
    if not callable(fn):
        raise TypeError(f"{target} is not callable")
    return name, fn


def spec(fn):
    """``module:function`` naming ``fn`` so that another process imports the same function."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module and module != "__main__" and "." not in name and "<" not in name:
        try:
            if getattr(importlib.import_module(module), name, None) is fn:
                return f"{module}:{name}"
        except ImportError:
            pass
    raise ValueError(
        f"service {fn!r} must be a module-level function another process can import "
        "(to run instances on threads of the endpoint process instead, use isolation='thread')"
    )
