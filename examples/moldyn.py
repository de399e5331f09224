"""Molecular dynamics: a port of the Java Grande Forum MPJ benchmark
JGFMolDynBench (section 3, md.java of the MPJ version, EPCC 2001; original
code by Dieter Heermann, converted to Java by Lorna Smith).

N particles (4*mm^3 on an fcc lattice) interact through a Lennard-Jones
potential with a cutoff, in a cubic box with periodic boundaries, for 50
moves. Every rank holds all particles; rank r computes the forces of the
pairs (i, j > i) for the particles i = r, r+p, r+2p, ... (as the original),
then the partial force arrays, the potential energy, the virial and the
interaction count are summed over all ranks with Allreduce, and every rank
moves all particles. JGF validates the final kinetic energy ``ek``.

The O(N^2) pair loop is vectorised with numpy in blocks of a rank's
particles, keeping the original's arithmetic: every pair quantity is
computed with the same operations in the same order, and every sum is
accumulated sequentially in the original's order (ufunc.at / cumsum), so on
one rank the result is bit-for-bit that of the Java loop.

Run: mpiws run -n 4 examples/moldyn.py [--size A|B] [--moves N]
The same file with the import line changed to ``from mpi4py import MPI``
runs under ``mpiexec -n 4 python moldyn.py``.
"""

import argparse
import json
import math
import sys

import numpy as np

from mpiws import MPI

# JGF's reference kinetic energies after 50 moves (JGFMolDynBench.JGFvalidate,
# refval[] = {1731.4306625334357, 7397.392307839352}). A sequential run of the
# Java loop on a current JVM gives 1731.4306625334377 and 7397.392307839353
# (as does this port on one rank): the reference is 2e-12 off already.
REFVAL = {"A": 1731.4306625334357, "B": 7397.392307839352}
DATASIZES = {"A": 8, "B": 13}
TOLERANCE = 1e-9  # JGF uses 1e-12; a force sum split across ranks needs more

DEN = 0.83134
TREF = 0.722
H = 0.064
IREP, ISTOP, IPRINT = 10, 19, 10
BLOCK = 32  # about BLOCK/p rows (particles i) per vectorised block of the force loop


class Random:
    """JGF's Park-Miller style generator with the polar Box-Muller ``seed``."""

    def __init__(self, iseed, v1, v2):
        self.iseed, self.v1, self.v2 = iseed, v1, v2

    def update(self):
        scale, imult, imod = 4.656612875e-10, 16807, 2147483647
        if self.iseed <= 0:
            self.iseed = 1
        is2 = self.iseed % 32768
        is1 = (self.iseed - is2) // 32768
        iss2 = is2 * imult
        is2 = iss2 % 32768
        is1 = (is1 * imult + (iss2 - is2) // 32768) % 65536
        self.iseed = (is1 * 32768 + is2) % imod
        return scale * self.iseed

    def seed(self):
        while True:
            u1 = self.update()
            u2 = self.update()
            self.v1 = 2.0 * u1 - 1.0
            self.v2 = 2.0 * u2 - 1.0
            s = self.v1 * self.v1 + self.v2 * self.v2
            if s < 1.0:
                return math.sqrt(-2.0 * math.log(s) / s)


def seqsum(a, start=0.0):
    """start + a[0] + a[1] + ... added left to right, as a Java loop does
    (np.sum adds pairwise, which rounds differently)."""
    if len(a) == 0:
        return start
    return float(np.cumsum(np.concatenate(([start], a)))[-1])


class MD:
    def __init__(self, size, comm):
        self.comm = comm
        self.rank, self.nprocs = comm.Get_rank(), comm.Get_size()
        mm = self.mm = DATASIZES[size]
        n = self.mdsize = mm * mm * mm * 4
        self.side = math.pow(n / DEN, 0.3333333)
        self.rcoff = mm / 4.0
        a = self.side / mm
        self.sideh = self.side * 0.5
        self.hsq = H * H
        self.hsq2 = self.hsq * 0.5
        self.rcoffs = self.rcoff * self.rcoff
        self.tscale = 16.0 / (1.0 * n - 1.0)
        self.vaver = 1.13 * math.sqrt(TREF / 24.0)
        self.vaverh = self.vaver * H

        # Particle generation: the fcc lattice, in the original's order.
        g = np.arange(mm, dtype=np.float64)
        ix, iy, iz = (c.ravel() for c in np.meshgrid(g, g, g, indexing="ij"))
        xs, ys, zs = [], [], []
        for lg in (0, 1):
            xs.append(ix * a + lg * a * 0.5)
            ys.append(iy * a + lg * a * 0.5)
            zs.append(iz * a)
        for lg in (1, 2):
            xs.append(ix * a + (2 - lg) * a * 0.5)
            ys.append(iy * a + (lg - 1) * a * 0.5)
            zs.append(iz * a + a * 0.5)
        self.x, self.y, self.z = (np.concatenate(c) for c in (xs, ys, zs))
        self.fx, self.fy, self.fz = (np.zeros(n) for _ in range(3))

        # Initialise velocities.
        rnd = Random(0, 0.0, 0.0)
        vel = []
        for _ in range(3):
            v = np.empty(n)
            for i in range(0, n, 2):
                r = rnd.seed()
                v[i] = r * rnd.v1
                v[i + 1] = r * rnd.v2
            vel.append(v)
        # Velocity scaling: remove the mean, then scale to the reference temperature.
        ekin = 0.0
        for k in range(3):
            sp = seqsum(vel[k]) / n
            vel[k] = vel[k] - sp
            ekin = seqsum(vel[k] * vel[k], ekin)
        ts = self.tscale * ekin
        sc = H * math.sqrt(TREF / ts)
        self.vx, self.vy, self.vz = (v * sc for v in vel)

        self.ekin = self.ek = self.epot = self.vir = self.vel = self.etot = self.ep = 0.0
        self.count = 0.0
        # the pairs within the cutoff, summed over all moves and ranks. (The MPJ
        # original reduces its running total, which counts earlier moves p times.)
        self.interactions = 0
        # buffers for the reductions
        self.tmp_epot = np.zeros(1)
        self.tmp_vir = np.zeros(1)
        self.tmp_interactions = np.zeros(1, dtype=np.int64)

    # -- the particle methods, vectorised over all particles ----------------

    def domove(self):
        side = self.side
        for c, v, f in ((self.x, self.vx, self.fx), (self.y, self.vy, self.fy), (self.z, self.vz, self.fz)):
            c += v
            c += f
            np.add(c, side, out=c, where=c < 0)
            np.subtract(c, side, out=c, where=c > side)
            v += f
            f[:] = 0.0

    def force(self):
        """The pairs (i, j > i) of this rank's particles i, accumulated into
        fx/fy/fz, epot, vir in the original's order. Returns the pair count."""
        n, side, sideh, rcoffs = self.mdsize, self.side, self.sideh, self.rcoffs
        x, y, z = self.x, self.y, self.z
        forces = (self.fx, self.fy, self.fz)
        acc = np.zeros(2)  # [epot, vir], accumulated pair by pair
        count = 0
        mine = np.arange(self.rank, n - 1, self.nprocs)  # the last particle has no j > i
        rows_per_block = max(8, BLOCK // self.nprocs)  # keeps the wasted triangle j <= i small
        for b in range(0, len(mine), rows_per_block):
            rows = mine[b : b + rows_per_block]
            j0 = int(rows[0]) + 1
            d = []
            for c in (x, y, z):
                dd = c[rows, None] - c[None, j0:]
                np.add(dd, side, out=dd, where=dd < -sideh)
                np.subtract(dd, side, out=dd, where=dd > sideh)
                d.append(dd)
            xx, yy, zz = d
            rd = xx * xx  # rd = xx*xx + yy*yy + zz*zz, added left to right
            sq = yy * yy
            rd += sq
            np.multiply(zz, zz, out=sq)
            rd += sq
            mask = rd <= rcoffs
            # only j > i: rows beyond the first start further right
            tri = int(rows[-1]) + 1 - j0
            if tri:
                mask[:, :tri] &= np.arange(j0, j0 + tri)[None, :] > rows[:, None]
            k = np.flatnonzero(mask)  # row-major: the original's (i, j) order
            r_, c_ = np.divmod(k, mask.shape[1])
            count += len(k)
            rdv = rd.ravel().take(k)
            rrd = 1.0 / rdv
            rrd2 = rrd * rrd
            rrd3 = rrd2 * rrd
            rrd4 = rrd2 * rrd2
            rrd6 = rrd2 * rrd4
            rrd7 = rrd6 * rrd
            r148 = rrd7 - 0.5 * rrd4
            zero = np.zeros(len(k), dtype=np.intp)
            np.add.at(acc, zero, rrd6 - rrd3)
            np.subtract.at(acc, zero + 1, rdv * r148)
            cols = c_ + j0
            for dd, f in zip(d, forces):
                fpair = dd.ravel().take(k) * r148
                np.subtract.at(f, cols, fpair)  # the j's, in (i, j) order
                fi = np.zeros(len(rows))
                np.add.at(fi, r_, fpair)  # fxi: the row sums, from 0.0, in j order
                f[rows] += fi  # no later row of this block touches these i
        self.epot += acc[0]  # epot and vir start from 0.0 each move
        self.vir += acc[1]
        return count

    def mkekin(self):
        for v, f in ((self.vx, self.fx), (self.vy, self.fy), (self.vz, self.fz)):
            f *= self.hsq2
            v += f
        sumt = (self.vx * self.vx) + (self.vy * self.vy) + (self.vz * self.vz)
        return seqsum(sumt)

    def velavg(self):
        sq = np.sqrt(self.vx * self.vx + self.vy * self.vy + self.vz * self.vz)
        self.count += float(np.count_nonzero(sq > self.vaverh))
        return seqsum(sq)

    def dscal(self, sc):
        self.vx *= sc
        self.vy *= sc
        self.vz *= sc

    # -- the time steps ------------------------------------------------------

    def runiters(self, movemx):
        comm, n = self.comm, self.mdsize
        for move in range(movemx):
            self.domove()  # move the particles and update velocities

            self.epot = 0.0
            self.vir = 0.0

            comm.Barrier()
            count = self.force()  # compute forces
            comm.Barrier()

            # global reduction on partial sums of the forces, epot, vir and interactions
            comm.Allreduce(MPI.IN_PLACE, self.fx, op=MPI.SUM)
            comm.Allreduce(MPI.IN_PLACE, self.fy, op=MPI.SUM)
            comm.Allreduce(MPI.IN_PLACE, self.fz, op=MPI.SUM)

            self.tmp_epot[0] = self.epot
            self.tmp_vir[0] = self.vir
            self.tmp_interactions[0] = count
            comm.Allreduce(MPI.IN_PLACE, self.tmp_epot, op=MPI.SUM)
            comm.Allreduce(MPI.IN_PLACE, self.tmp_vir, op=MPI.SUM)
            comm.Allreduce(MPI.IN_PLACE, self.tmp_interactions, op=MPI.SUM)
            self.epot = float(self.tmp_epot[0])
            self.vir = float(self.tmp_vir[0])
            self.interactions += int(self.tmp_interactions[0])

            comm.Barrier()

            self.ekin = self.mkekin() / self.hsq  # scale forces, update velocities

            self.count = 0.0
            self.vel = self.velavg() / H  # average velocity

            # temperature scale if required
            if move < ISTOP and (move + 1) % IREP == 0:
                sc = math.sqrt(TREF / (self.tscale * self.ekin))
                self.dscal(sc)
                self.ekin = TREF / self.tscale

            # sum to get full potential energy and virial
            if (move + 1) % IPRINT == 0:
                self.ek = 24.0 * self.ekin
                self.epot = 4.0 * self.epot
                self.etot = self.ek + self.epot
                self.ep = self.epot
                self.temp = self.tscale * self.ekin
                self.pres = DEN * 16.0 * (self.ekin - self.vir) / n
                self.vel = self.vel / n
                self.rp = (self.count / n) * 100.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(DATASIZES), default="A")
    ap.add_argument("--moves", type=int, default=50)
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()

    md = MD(args.size, comm)  # JGFinitialise

    comm.Barrier()  # JGFapplication: the timed part
    t0 = MPI.Wtime()
    md.runiters(args.moves)
    comm.Barrier()
    seconds = MPI.Wtime() - t0

    ek = md.ek
    # every rank moved its own copy of the particles: they must agree
    agree = comm.allreduce(ek, op=MPI.MIN) == comm.allreduce(ek, op=MPI.MAX)
    if args.moves == 50:
        dev = abs(ek - REFVAL[args.size])
        valid = bool(dev < TOLERANCE and agree)
    else:
        dev, valid = None, None

    if rank == 0:
        print(
            f"moldyn size {args.size}: {md.mdsize} particles, {args.moves} moves on {nprocs} ranks, "
            f"{md.interactions} interactions, {seconds:.3f} s"
        )
        print(f"kinetic energy ek = {ek!r}  (potential {md.ep!r}, total {md.etot!r})")
        if not agree:
            print("Validation failed: the ranks' kinetic energies differ")
        if valid is None:
            print("validation skipped (reference values are for 50 moves)")
        elif valid:
            print(f"Validation passed: |ek - ref| = {dev:.3e} (ref {REFVAL[args.size]!r}, tolerance {TOLERANCE:g})")
        else:
            print(f"Validation failed: |ek - ref| = {dev:.3e} (ref {REFVAL[args.size]!r}, tolerance {TOLERANCE:g})")
        result = {
            "app": "moldyn",
            "size": args.size,
            "ranks": nprocs,
            "seconds": seconds,
            "ek": ek,
            "valid": valid,
            "dev": dev,
            "moves": args.moves,
            "interactions": md.interactions,
        }
        print("RESULT " + json.dumps(result), flush=True)
    if valid is False:
        sys.exit(1)


if __name__ == "__main__":
    main()
