//! Ping-pong between two endpoints in one process, through the core alone
//! (no Python): the transport's own latency. `cargo run --release --example pingpong`

use std::time::Instant;

use bytes::Bytes;
use mpiws_core::wait_outcome;
use mpiws_core::Binding;
use mpiws_core::Comm;
use mpiws_core::Outcome;
use mpiws_core::{Config, Endpoint};

fn main() {
    let a = Endpoint::start(Config::default()).unwrap();
    let b = Endpoint::start(Config::default()).unwrap();
    let endpoints = vec![a.url(), b.url()];
    let bind = |rank| Binding {
        domain: "bench".into(),
        rank,
        endpoints: endpoints.clone(),
        token: "t".into(),
        service: String::new(),
        params: serde_json::Value::Null,
    };
    let c0 = Comm::world(a.create_instance(bind(0), false, None).unwrap());
    let c1 = Comm::world(b.create_instance(bind(1), false, None).unwrap());
    // One store round trip (request + 204) at a time, nobody receiving.
    let n = 5000;
    let t = Instant::now();
    for _ in 0..n {
        wait_outcome(&c0.isend(1, 2, vec![Bytes::from_static(b"12345678")], vec![], false).unwrap(), None).unwrap();
    }
    println!("store round trip: {:.1} us", t.elapsed().as_secs_f64() / n as f64 * 1e6);
    for size in [8usize, 512, 1024, 4096, 65536, 1 << 20, 16 << 20] {
        let n = if size > 1 << 16 { 20 } else { 5000 };
        let payload = Bytes::from(vec![7u8; size]);
        let p1 = payload.clone();
        let c1b = c1.clone();
        let peer = std::thread::spawn(move || {
            for _ in 0..n {
                let (_, r) = c1b.irecv(0, 1).unwrap();
                match wait_outcome(&r, None).unwrap() {
                    Outcome::Received { .. } => {}
                    _ => panic!(),
                }
                wait_outcome(&c1b.isend(0, 1, vec![p1.clone()], vec![], false).unwrap(), None).unwrap();
            }
        });
        let t = Instant::now();
        for _ in 0..n {
            wait_outcome(&c0.isend(1, 1, vec![payload.clone()], vec![], false).unwrap(), None).unwrap();
            let (_, r) = c0.irecv(1, 1).unwrap();
            wait_outcome(&r, None).unwrap();
        }
        let half = t.elapsed().as_secs_f64() / n as f64 / 2.0;
        peer.join().unwrap();
        println!("{size:>10} B: {:8.1} us half round trip, {:6.2} GB/s", half * 1e6, size as f64 / half / 1e9);
    }
}
