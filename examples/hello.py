"""Hello world: every rank reports in. Run: mpiws run -n 4 examples/hello.py"""

from mpiws import MPI

comm = MPI.COMM_WORLD
print(f"Hello from rank {comm.Get_rank()} of {comm.Get_size()} on {MPI.Get_processor_name()}")
