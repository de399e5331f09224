# Adapted from mpi4py (https://github.com/mpi4py/mpi4py), src/mpi4py/util/__init__.py
# at commit 7c8dac2c58203a4d538961c6524e3940b04a42dc; mpi4py's licence is in pkl5.py beside this file.
# Author:  Lisandro Dalcin
# Contact: dalcinl@gmail.com
"""Miscellaneous utilities (mpi4py.util): ``pkl5``, ``dtlib``, ``sync``."""
