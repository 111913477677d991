//! The rendezvous of a multi-process group, the way `torch.distributed`'s `env://` does it:
//! every process reads `MASTER_ADDR`, `MASTER_PORT`, `RANK` and `WORLD_SIZE` (and
//! `LOCAL_RANK`, its GPU on its node; default: `RANK`). Rank 0 listens on the master's port
//! and hands every other rank a blob — NCCL's unique id — over TCP; then the ranks talk
//! through NCCL alone. Nothing here knows about NCCL: it moves bytes.
use crate::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// This process's place in the group, from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvRank {
    pub master_addr: String,
    pub master_port: u16,
    pub rank: usize,
    pub world_size: usize,
    /// This rank's device on its node.
    pub local_rank: usize,
}

fn bad(msg: String) -> Error {
    Error::Mesh(msg)
}

impl EnvRank {
    /// Read `MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE` and `LOCAL_RANK`.
    pub fn from_env() -> Result<EnvRank, Error> {
        EnvRank::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`EnvRank::from_env`] over any lookup (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<EnvRank, Error> {
        let need = |k: &str| {
            get(k).ok_or_else(|| {
                bad(format!(
                    "{k} is not set: a multi-process group needs MASTER_ADDR, MASTER_PORT, \
                     RANK and WORLD_SIZE (as torchrun sets them)"
                ))
            })
        };
        let num = |k: &str, v: String| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| bad(format!("{k}={v:?} is not a number")))
        };
        let master_addr = need("MASTER_ADDR")?;
        let port = need("MASTER_PORT")?;
        let master_port = (port.trim().parse::<u16>())
            .map_err(|_| bad(format!("MASTER_PORT={port:?} is not a port number")))?;
        let rank = num("RANK", need("RANK")?)?;
        let world_size = num("WORLD_SIZE", need("WORLD_SIZE")?)?;
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => num("LOCAL_RANK", v)?,
            None => rank,
        };
        if world_size == 0 || rank >= world_size {
            return Err(bad(format!(
                "RANK={rank} must lie in 0..WORLD_SIZE={world_size}"
            )));
        }
        Ok(EnvRank {
            master_addr,
            master_port,
            rank,
            world_size,
            local_rank,
        })
    }

    /// Rank 0 sends `make()`'s bytes to every other rank; every rank returns them. Waits
    /// at most `timeout` for the others.
    pub fn share(
        &self,
        make: impl FnOnce() -> Result<Vec<u8>, Error>,
        timeout: Duration,
    ) -> Result<Vec<u8>, Error> {
        let deadline = Instant::now() + timeout;
        let addr = format!("{}:{}", self.master_addr, self.master_port);
        if self.rank == 0 {
            let blob = make()?;
            if self.world_size > 1 {
                serve(&addr, &blob, self.world_size - 1, deadline)?;
            }
            Ok(blob)
        } else {
            fetch(&addr, self.rank, deadline)
        }
    }
}

const MAGIC: &[u8; 8] = b"rlx-rdv1";

/// Accept `peers` connections; each sends the magic and its rank, gets the blob.
fn serve(addr: &str, blob: &[u8], peers: usize, deadline: Instant) -> Result<(), Error> {
    let io = |what: &str, e: std::io::Error| bad(format!("rendezvous at {addr}: {what}: {e}"));
    let listener = TcpListener::bind(addr).map_err(|e| io("cannot listen", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| io("set_nonblocking", e))?;
    let mut seen = Vec::new();
    while seen.len() < peers {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).map_err(|e| io("accept", e))?;
                s.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut hello = [0u8; 16];
                s.read_exact(&mut hello).map_err(|e| io("read hello", e))?;
                if &hello[..8] != MAGIC {
                    // Not one of ours (a port scanner, another program): ignore it.
                    continue;
                }
                let rank = u64::from_le_bytes(hello[8..].try_into().unwrap_or_default());
                if seen.contains(&rank) {
                    return Err(bad(format!(
                        "rendezvous at {addr}: rank {rank} joined twice"
                    )));
                }
                seen.push(rank);
                let mut msg = (blob.len() as u64).to_le_bytes().to_vec();
                msg.extend_from_slice(blob);
                s.write_all(&msg).map_err(|e| io("send", e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(bad(format!(
                        "rendezvous at {addr}: {} of {peers} ranks joined before the timeout",
                        seen.len()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io("accept", e)),
        }
    }
    Ok(())
}

/// Connect to rank 0 (retrying while it is not up yet) and read the blob.
fn fetch(addr: &str, rank: usize, deadline: Instant) -> Result<Vec<u8>, Error> {
    let io = |what: &str, e: std::io::Error| bad(format!("rendezvous at {addr}: {what}: {e}"));
    let target = (addr.to_socket_addrs().map_err(|e| io("resolve", e))?)
        .next()
        .ok_or_else(|| bad(format!("rendezvous: {addr} resolves to nothing")))?;
    let mut s = loop {
        match TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => {
                return Err(io("rank 0 never answered", e));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    s.set_read_timeout(Some(left)).ok();
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&(rank as u64).to_le_bytes());
    s.write_all(&hello).map_err(|e| io("send hello", e))?;
    let mut len = [0u8; 8];
    s.read_exact(&mut len).map_err(|e| io("read length", e))?;
    let len = u64::from_le_bytes(len);
    if len > 1 << 20 {
        return Err(bad(format!(
            "rendezvous at {addr}: a {len}-byte blob is not ours"
        )));
    }
    let mut blob = vec![0u8; len as usize];
    s.read_exact(&mut blob).map_err(|e| io("read blob", e))?;
    Ok(blob)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn env_is_read_and_checked() {
        let ok = [
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
        ];
        let r = EnvRank::from_lookup(env(&ok)).unwrap();
        assert_eq!(
            (r.rank, r.world_size, r.local_rank, r.master_port),
            (1, 2, 1, 29500)
        );
        let mut bad_rank = ok;
        bad_rank[2] = ("RANK", "2");
        assert!(EnvRank::from_lookup(env(&bad_rank)).is_err());
        let mut bad_port = ok;
        bad_port[1] = ("MASTER_PORT", "http");
        assert!(EnvRank::from_lookup(env(&bad_port)).is_err());
        let e = EnvRank::from_lookup(env(&ok[1..])).unwrap_err().to_string();
        assert!(e.contains("MASTER_ADDR"), "{e}");
    }

    #[test]
    fn every_rank_gets_rank_zeros_blob() {
        // A free port: bind 0, read it, let it go (rank 0 binds it again).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let world = 4;
        let blob: Vec<u8> = (0..128u32).map(|i| (i * 7 + 3) as u8).collect();
        let got: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..world)
                .map(|rank| {
                    let blob = blob.clone();
                    s.spawn(move || {
                        let me = EnvRank {
                            master_addr: "127.0.0.1".into(),
                            master_port: port,
                            rank,
                            world_size: world,
                            local_rank: rank,
                        };
                        me.share(|| Ok(blob), Duration::from_secs(20)).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|b| *b == blob));
    }

    #[test]
    fn a_missing_master_is_a_timeout_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let me = EnvRank {
            master_addr: "127.0.0.1".into(),
            master_port: port,
            rank: 1,
            world_size: 2,
            local_rank: 1,
        };
        let e = me
            .share(|| Ok(vec![]), Duration::from_millis(300))
            .unwrap_err();
        assert!(e.to_string().contains("never answered"), "{e}");
    }
}
