//! A tiny synchronous client that speaks raw protocol messages: one request, wait for its
//! reply. It exists to test the cluster itself (and to poke any FDB 7.3 server by hand); it
//! has no retry loop, no location cache and no transactions. Applications use the real client.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use fdb_protocol::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion,
};
use fdb_protocol::messages::commit::{
    CommitID, CommitTransactionRef, CommitTransactionRequest, GetKeyServerLocationsReply,
    GetKeyServerLocationsRequest,
};
use fdb_protocol::messages::coordination::{
    ClientDBInfo, CommitProxyInterface, OpenDatabaseCoordRequest,
};
use fdb_protocol::messages::grv::{GetReadVersionReply, GetReadVersionRequest};
use fdb_protocol::messages::storage::{
    GetKeyReply, GetKeyRequest, GetKeyValuesReply, GetKeyValuesRequest, GetValueReply,
    GetValueRequest, StorageServerInterface, WatchValueRequest,
};
use fdb_protocol::messages::types::{KeySelector, KeyValue, TenantInfo, Version};
use fdb_protocol::messages::{decode_reply, ErrorOr, ReplyPromise, RequestStream};
use fdb_protocol::serializer::{decode_root, encode, Message};
use fdb_protocol::uid::well_known;
use fdb_protocol::Uid;

/// Why a raw call failed (FDB errors come back inside `ErrorOr`, not here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawError {
    /// Connecting, reading or writing failed (e.g. the process is down).
    Io(String),
    /// No reply within the client's timeout.
    Timeout,
    /// The reply did not decode as the expected type.
    Decode(String),
    /// The server said it has no endpoint with the token we sent to.
    EndpointNotFound(Uid),
    /// The `ClientDBInfo` names no proxy of that kind (as between a recovery's first
    /// publication and the next): there is nobody to ask.
    NoProxies,
}

struct RawConn {
    stream: TcpStream,
    decoder: FrameDecoder,
    inbox: Vec<(Uid, Bytes)>,
}

/// See the [cluster module docs](crate::cluster).
pub struct RawClient {
    conns: HashMap<SocketAddr, RawConn>,
    rng: u64,
    /// How long a call waits for its reply (default 5 s).
    pub timeout: Duration,
}

impl Default for RawClient {
    fn default() -> Self {
        Self::new()
    }
}

/// The socket address of an endpoint.
pub fn stream_addr(s: &RequestStream) -> SocketAddr {
    let a = &s.endpoint.addresses.address;
    SocketAddr::new(IpAddr::from(a.ip), a.port)
}

impl RawClient {
    pub fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
        RawClient {
            conns: HashMap::new(),
            rng: seed | 1,
            timeout: Duration::from_secs(5),
        }
    }

    /// A fresh reply token.
    pub fn reply_promise(&mut self) -> ReplyPromise {
        let mut next = || {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.rng
        };
        ReplyPromise {
            token: Uid::new(next(), next()),
        }
    }

    /// Forgets the connection to `addr` (closing it).
    pub fn disconnect(&mut self, addr: SocketAddr) {
        self.conns.remove(&addr);
    }

    fn conn(&mut self, addr: SocketAddr) -> Result<&mut RawConn, RawError> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.conns.entry(addr) {
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .map_err(|e| RawError::Io(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            let mut hello = BytesMut::new();
            ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut hello);
            stream
                .write_all(&hello)
                .map_err(|e| RawError::Io(e.to_string()))?;
            slot.insert(RawConn {
                stream,
                decoder: FrameDecoder::new(true, true),
                inbox: Vec::new(),
            });
        }
        Ok(self.conns.get_mut(&addr).unwrap())
    }

    /// Sends `msg` to `token` at `addr`.
    pub fn send<M: Message>(
        &mut self,
        addr: SocketAddr,
        token: Uid,
        msg: &M,
    ) -> Result<(), RawError> {
        let body = encode(msg);
        let mut out = BytesMut::new();
        encode_packet(&mut out, token, &body, true);
        let c = self.conn(addr)?;
        if let Err(e) = c.stream.write_all(&out) {
            self.conns.remove(&addr);
            return Err(RawError::Io(e.to_string()));
        }
        Ok(())
    }

    /// Waits for the reply sent to `reply` on the connection to `addr`; `sent_to` is the token
    /// the request went to (to recognise `ENDPOINT_NOT_FOUND`).
    pub fn recv<R: Message>(
        &mut self,
        addr: SocketAddr,
        reply: Uid,
        sent_to: Uid,
        timeout: Duration,
    ) -> Result<ErrorOr<R>, RawError> {
        let msg = self.recv_bytes(addr, reply, sent_to, timeout)?;
        decode_reply::<R>(&msg).map_err(|e| RawError::Decode(format!("{e:?}")))
    }

    /// [`RawClient::recv`], undecoded (for replies without a plain `ErrorOr<T>` shape, e.g.
    /// the leader's `ErrorOr<Optional<LeaderInfo>>`: decode them with `decode_any`).
    pub fn recv_bytes(
        &mut self,
        addr: SocketAddr,
        reply: Uid,
        sent_to: Uid,
        timeout: Duration,
    ) -> Result<Bytes, RawError> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let c = self.conn(addr)?;
            if let Some(i) = c.inbox.iter().position(|(t, _)| *t == reply) {
                let (_, msg) = c.inbox.remove(i);
                return Ok(msg);
            }
            if let Some(i) = c.inbox.iter().position(|(t, m)| {
                *t == well_known::ENDPOINT_NOT_FOUND && decode_root::<Uid>(m) == Ok(sent_to)
            }) {
                c.inbox.remove(i);
                return Err(RawError::EndpointNotFound(sent_to));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RawError::Timeout);
            }
            let _ = c
                .stream
                .set_read_timeout(Some((deadline - now).min(Duration::from_millis(50))));
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    self.conns.remove(&addr);
                    return Err(RawError::Io("connection closed".into()));
                }
                Ok(n) => {
                    c.decoder.feed(&buf[..n]);
                    loop {
                        match c.decoder.next_frame() {
                            Ok(Some(Incoming::Packet(p))) => c.inbox.push((p.token, p.message)),
                            Ok(Some(Incoming::Connect(_))) => {}
                            Ok(None) => break,
                            Err(e) => {
                                self.conns.remove(&addr);
                                return Err(RawError::Decode(format!("{e:?}")));
                            }
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => {
                    self.conns.remove(&addr);
                    return Err(RawError::Io(e.to_string()));
                }
            }
        }
    }

    /// Reads from `addr` for `dur` and returns the tokens of every packet received so far and
    /// not yet taken by [`RawClient::recv`], in arrival order.
    pub fn pump(&mut self, addr: SocketAddr, dur: Duration) -> Vec<Uid> {
        let never = Uid::new(0, 0);
        let _ = self.recv::<fdb_protocol::messages::Void>(addr, never, never, dur);
        self.conns
            .get(&addr)
            .map(|c| c.inbox.iter().map(|(t, _)| *t).collect())
            .unwrap_or_default()
    }

    /// Sends a request built around a fresh reply token and waits for its reply.
    pub fn call<M: Message, R: Message>(
        &mut self,
        to: &RequestStream,
        token: Uid,
        make: impl FnOnce(ReplyPromise) -> M,
    ) -> Result<ErrorOr<R>, RawError> {
        let reply = self.reply_promise();
        let addr = stream_addr(to);
        self.send(addr, token, &make(reply.clone()))?;
        self.recv(addr, reply.token, token, self.timeout)
    }

    // --- the requests a client makes ------------------------------------------------------------

    /// `OpenDatabaseCoordRequest` to a coordinator.
    pub fn open_database(
        &mut self,
        coordinator: SocketAddr,
        known_client_info_id: Uid,
        timeout: Duration,
    ) -> Result<ErrorOr<ClientDBInfo>, RawError> {
        let reply = self.reply_promise();
        let token = well_known::CLIENT_LEADER_REG_OPEN_DATABASE;
        let req = OpenDatabaseCoordRequest {
            known_client_info_id,
            reply: reply.clone(),
            ..Default::default()
        };
        self.send(coordinator, token, &req)?;
        self.recv(coordinator, reply.token, token, timeout)
    }

    /// A read version from the first GRV proxy.
    pub fn read_version(
        &mut self,
        info: &ClientDBInfo,
    ) -> Result<ErrorOr<GetReadVersionReply>, RawError> {
        let grv = info.grv_proxies.first().ok_or(RawError::NoProxies)?;
        let token = grv.stream(0);
        self.call(&grv.get_consistent_read_version, token, |reply| {
            GetReadVersionRequest {
                transaction_count: 1,
                flags: GetReadVersionRequest::PRIORITY_DEFAULT,
                reply,
                max_version: -1,
                ..Default::default()
            }
        })
    }

    /// Key locations from the first commit proxy.
    pub fn locations(
        &mut self,
        info: &ClientDBInfo,
        begin: &[u8],
        end: Option<&[u8]>,
        limit: i32,
        reverse: bool,
    ) -> Result<ErrorOr<GetKeyServerLocationsReply>, RawError> {
        let p = info.commit_proxies.first().ok_or(RawError::NoProxies)?;
        let token = p.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS);
        self.call(&p.commit, token, |reply| GetKeyServerLocationsRequest {
            begin: Bytes::copy_from_slice(begin),
            end: end.map(Bytes::copy_from_slice),
            limit,
            reverse,
            reply,
            tenant: TenantInfo::none(),
            ..Default::default()
        })
    }

    /// A commit to the first commit proxy.
    pub fn commit(
        &mut self,
        info: &ClientDBInfo,
        transaction: CommitTransactionRef,
    ) -> Result<ErrorOr<CommitID>, RawError> {
        let p = info.commit_proxies.first().ok_or(RawError::NoProxies)?;
        let token = p.stream(CommitProxyInterface::COMMIT);
        self.call(&p.commit, token, |reply| CommitTransactionRequest {
            transaction,
            reply,
            tenant_info: TenantInfo::none(),
            ..Default::default()
        })
    }

    /// `GetValueRequest` to one storage server.
    pub fn get_value(
        &mut self,
        ss: &StorageServerInterface,
        key: &[u8],
        version: Version,
    ) -> Result<ErrorOr<GetValueReply>, RawError> {
        let token = ss.stream(StorageServerInterface::GET_VALUE);
        self.call(&ss.get_value, token, |reply| GetValueRequest {
            key: Bytes::copy_from_slice(key),
            version,
            reply,
            tenant_info: TenantInfo::none(),
            ..Default::default()
        })
    }

    /// `GetKeyRequest` to one storage server.
    pub fn get_key(
        &mut self,
        ss: &StorageServerInterface,
        sel: KeySelector,
        version: Version,
    ) -> Result<ErrorOr<GetKeyReply>, RawError> {
        let token = ss.stream(StorageServerInterface::GET_KEY);
        self.call(&ss.get_value, token, |reply| GetKeyRequest {
            sel,
            version,
            reply,
            tenant_info: TenantInfo::none(),
            ..Default::default()
        })
    }

    /// `GetKeyValuesRequest` to one storage server.
    pub fn get_key_values(
        &mut self,
        ss: &StorageServerInterface,
        begin: KeySelector,
        end: KeySelector,
        version: Version,
        limit: i32,
        limit_bytes: i32,
    ) -> Result<ErrorOr<GetKeyValuesReply>, RawError> {
        let token = ss.stream(StorageServerInterface::GET_KEY_VALUES);
        self.call(&ss.get_value, token, |reply| GetKeyValuesRequest {
            begin,
            end,
            version,
            limit,
            limit_bytes,
            reply,
            tenant_info: TenantInfo::none(),
            ..Default::default()
        })
    }

    /// Sends a `WatchValueRequest` without waiting; returns `(address, reply token, token)` for
    /// [`RawClient::recv`].
    pub fn send_watch(
        &mut self,
        ss: &StorageServerInterface,
        key: &[u8],
        value: Option<&[u8]>,
        version: Version,
    ) -> Result<(SocketAddr, Uid, Uid), RawError> {
        let token = ss.stream(StorageServerInterface::WATCH_VALUE);
        let reply = self.reply_promise();
        let addr = stream_addr(&ss.get_value);
        let req = WatchValueRequest {
            key: Bytes::copy_from_slice(key),
            value: value.map(Bytes::copy_from_slice),
            version,
            reply: reply.clone(),
            tenant_info: TenantInfo::none(),
            ..Default::default()
        };
        self.send(addr, token, &req)?;
        Ok((addr, reply.token, token))
    }

    // --- routed helpers -------------------------------------------------------------------------

    /// Reads one key at `version`: location lookup, then the first server of its team.
    pub fn get(
        &mut self,
        info: &ClientDBInfo,
        key: &[u8],
        version: Version,
    ) -> Result<ErrorOr<GetValueReply>, RawError> {
        let loc = match self.locations(info, key, None, 100, false)? {
            ErrorOr::Ok(l) => l,
            ErrorOr::Err(e) => return Ok(ErrorOr::Err(e)),
        };
        let ss = loc.results[0].servers[0].clone();
        self.get_value(&ss, key, version)
    }

    /// Reads every row of `[begin, end)` at `version`, shard by shard, as a client without
    /// read-your-writes would. Any error (in `ErrorOr` or a reply's `error`) is returned.
    pub fn range(
        &mut self,
        info: &ClientDBInfo,
        begin: &[u8],
        end: &[u8],
        version: Version,
    ) -> Result<Result<Vec<KeyValue>, fdb_protocol::error::ErrorCode>, RawError> {
        let mut rows = Vec::new();
        let mut from = Bytes::copy_from_slice(begin);
        while from[..] < end[..] {
            let loc = match self.locations(info, &from, Some(end), 100, false)? {
                ErrorOr::Ok(l) => l,
                ErrorOr::Err(e) => return Ok(Err(e)),
            };
            let shard = &loc.results[0];
            let shard_end = if shard.range.end[..] < end[..] {
                shard.range.end.clone()
            } else {
                Bytes::copy_from_slice(end)
            };
            let ss = shard.servers[0].clone();
            loop {
                let rep = match self.get_key_values(
                    &ss,
                    KeySelector::first_greater_or_equal(from.clone()),
                    KeySelector::first_greater_or_equal(shard_end.clone()),
                    version,
                    1000,
                    1 << 20,
                )? {
                    ErrorOr::Ok(r) => r,
                    ErrorOr::Err(e) => return Ok(Err(e)),
                };
                if let Some(e) = rep.error {
                    return Ok(Err(e));
                }
                let last = rep.data.0.last().map(|kv| kv.key.clone());
                rows.extend(rep.data.0);
                match (rep.more, last) {
                    (true, Some(k)) => from = super::store::key_after(&k),
                    _ => break,
                }
            }
            from = shard_end;
        }
        Ok(Ok(rows))
    }
}
