"""A service deployed on endpoints: each instance adds its share of
1..params["n"] and rank 0 collects the total.

Deploy (run from the repository root, or put this folder on PYTHONPATH):
    mpiws serve --port 8001 --service sum=examples.service_sum:service &
    mpiws serve --port 8002 --service sum=examples.service_sum:service &
Start a domain of 4 ranks on them (a URL may repeat):
    mpiws run --endpoints http://127.0.0.1:8001,http://127.0.0.1:8002,http://127.0.0.1:8001,http://127.0.0.1:8002 \
              --service sum --params '{"n": 1000}'
"""


def service(comm, params):
    n = int(params.get("n", 100))
    rank, size = comm.Get_rank(), comm.Get_size()
    part = sum(range(rank + 1, n + 1, size))
    if rank == 0:
        total = part + sum(comm.recv(source=r, tag=1) for r in range(1, size))
        return {"total": total, "ranks": size}
    comm.send(part, dest=0, tag=1)
    return {"part": part}
