"""Starting domains: ``mpiws run -n N prog.py`` (local rank processes, like
mpiexec) and ``mpiws run --endpoints ... --service NAME`` (running endpoints).
Both start the domain with the same HTTP *run* operation and watch it with
the *status* operation (see ``domain``)."""
