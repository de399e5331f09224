"""Coupled simulation: heat conduction through a composite bar.

The bar is made of p materials joined end to end, one per rank: each rank is
a service that solves its own material (its own conductivity k and
volumetric heat capacity rho*c) by explicit finite volumes on a uniform
grid. The left end is held at T_HOT, the right end at T_COLD; each material
starts at its own temperature. Every time step neighbouring ranks exchange
their boundary cell temperatures (Sendrecv), and both sides of an interface
use the same face conductance, the harmonic mean of the two conductivities
(2 k1 k2 / (k1 + k2): the exact conductance of two half cells in series),
so the heat flux leaving one material is the flux entering the other. The
coupled solution is then the single-domain solution of the whole bar, which
rank 0 also computes alone and compares with it.

For cell i between faces i and i+1 (flux F_f = kf_f (T_left - T_right) / dx):

    T_i += dt / (rho c_i dx) * (F_i - F_{i+1})

stable (and free of overshoot) when dt * (kf_i + kf_{i+1}) <= rho c_i dx^2
for every cell; dt is 0.9 times the smallest such limit over the bar. A
fixed end temperature acts through half a cell: face conductance 2 k.

Run:  mpiws run -n 4 examples/coupled_heat.py --cells 4000 --steps 5000
The same file, its mpiws import line switched to mpi4py, runs under
``mpiexec -n 4 python coupled_heat.py``.
"""

import argparse
import json
import sys

import numpy as np

from mpiws import MPI

LENGTH = 0.1  # m
T_HOT, T_COLD = 100.0, 0.0  # deg C at the left and right ends
SAFETY = 0.9

# name, conductivity k (W/m/K), volumetric heat capacity rho*c (J/m^3/K), initial T (deg C)
MATERIALS = [
    ("copper", 401.0, 3.45e6, 80.0),
    ("stainless steel", 16.0, 3.90e6, 20.0),
    ("aluminium", 237.0, 2.42e6, 60.0),
    ("granite", 2.8, 2.20e6, 10.0),
    ("brass", 109.0, 3.20e6, 70.0),
    ("lead", 35.0, 1.45e6, 30.0),
    ("glass", 1.0, 2.10e6, 50.0),
    ("iron", 80.0, 3.54e6, 40.0),
]


def blocks(n, p):
    """Sizes and offsets of p nearly equal blocks of n (the first n % p get one more)."""
    sizes = [n // p + (1 if j < n % p else 0) for j in range(p)]
    return sizes, [sum(sizes[:j]) for j in range(p)]


def harmonic(k1, k2):
    return 2.0 * k1 * k2 / (k1 + k2)


def face_conductances(k_cells, k_left, k_right):
    """Conductances of the len(k_cells)+1 faces of a run of cells; an end
    given as None is a fixed-temperature boundary (half a cell: 2 k)."""
    ext = np.concatenate(([k_left if k_left is not None else 1.0], k_cells, [k_right if k_right is not None else 1.0]))
    kf = harmonic(ext[:-1], ext[1:])
    if k_left is None:
        kf[0] = 2.0 * k_cells[0]
    if k_right is None:
        kf[-1] = 2.0 * k_cells[-1]
    return kf


def step(u, kf, coef):
    """One explicit step on u = [ghost, cells..., ghost], in place."""
    flux = kf * (u[:-1] - u[1:])
    u[1:-1] += coef * (flux[:-1] - flux[1:])


def stable_dt(kf, rho_c, dx):
    return float(np.min(rho_c * dx * dx / (kf[:-1] + kf[1:])))


def single_domain(materials, sizes, dx, dt, steps):
    """The whole bar on one process: the reference solution."""
    k = np.concatenate([np.full(m, mat[1]) for mat, m in zip(materials, sizes)])
    rho_c = np.concatenate([np.full(m, mat[2]) for mat, m in zip(materials, sizes)])
    u = np.concatenate([[T_HOT]] + [np.full(m, mat[3]) for mat, m in zip(materials, sizes)] + [[T_COLD]])
    kf = face_conductances(k, None, None)
    coef = dt / (rho_c * dx * dx)
    for _ in range(steps):
        step(u, kf, coef)
    return u[1:-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=4000, help="cells in the whole bar")
    ap.add_argument("--steps", type=int, default=5000, help="time steps")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    cells, steps = args.cells, args.steps
    if cells < p:
        if rank == 0:
            print(f"need at least one cell per material ({cells} cells < {p} ranks)", file=sys.stderr)
        sys.exit(2)
    sizes, offsets = blocks(cells, p)
    m = sizes[rank]
    dx = LENGTH / cells

    # This rank's material; the neighbours tell each other their conductivities.
    _name, k, rho_c, t0 = MATERIALS[rank % len(MATERIALS)]
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < p - 1 else MPI.PROC_NULL
    k_left = comm.sendrecv(k, dest=left, sendtag=10, source=left, recvtag=11) if rank > 0 else None
    k_right = comm.sendrecv(k, dest=right, sendtag=11, source=right, recvtag=10) if rank < p - 1 else None

    kf = face_conductances(np.full(m, k), k_left, k_right)
    coef_rho_c = np.full(m, rho_c)
    dt = SAFETY * comm.allreduce(stable_dt(kf, coef_rho_c, dx), op=MPI.MIN)
    coef = dt / (coef_rho_c * dx * dx)

    u = np.empty(m + 2)
    u[1:-1] = t0
    u[0] = T_HOT if rank == 0 else np.nan  # ghosts: fixed end or neighbour's cell
    u[-1] = T_COLD if rank == p - 1 else np.nan

    comm.Barrier()
    start = MPI.Wtime()
    for _ in range(steps):
        # my last cell -> right neighbour's left ghost; my first cell -> left neighbour's right ghost
        comm.Sendrecv(u[m : m + 1], dest=right, sendtag=1, recvbuf=u[0:1], source=left, recvtag=1)
        comm.Sendrecv(u[1:2], dest=left, sendtag=2, recvbuf=u[m + 1 : m + 2], source=right, recvtag=2)
        step(u, kf, coef)
    comm.Barrier()
    seconds = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)

    # Rank 0 gathers the coupled solution and solves the whole bar alone.
    materials = comm.gather(MATERIALS[rank % len(MATERIALS)], root=0)
    T = np.empty(cells) if rank == 0 else None
    comm.Gatherv(np.ascontiguousarray(u[1:-1]), [T, sizes, offsets, MPI.DOUBLE] if rank == 0 else None, root=0)
    valid = None
    if rank == 0:
        ref = single_domain(materials, sizes, dx, dt, steps)
        diff = float(np.max(np.abs(T - ref)))
        valid = bool(diff < 1e-9 and np.all(np.isfinite(T)))
        # temperature at an interface: where the two half-cell fluxes agree
        face = [
            (materials[j][1] * T[o - 1] + materials[j + 1][1] * T[o]) / (materials[j][1] + materials[j + 1][1])
            for j, o in enumerate(offsets[1:])
        ]
        interfaces = ", ".join(f"{materials[j][0]}|{materials[j + 1][0]} {t:.3f}" for j, t in enumerate(face))
        print(
            f"{p} materials, {cells} cells, {steps} steps of {dt:.3e} s ({steps * dt:.3f} s simulated); "
            f"interface temperatures: {interfaces or 'none'}; max |coupled - single| = {diff:.3e}"
        )
        print(
            "RESULT "
            + json.dumps(
                {
                    "app": "coupled_heat",
                    "cells": cells,
                    "steps": steps,
                    "ranks": p,
                    "seconds": round(seconds, 6),
                    "valid": valid,
                }
            ),
            flush=True,
        )
    valid = comm.bcast(valid, root=0)
    if not valid:
        sys.exit(1)


if __name__ == "__main__":
    main()
