//! One connection's bytes over its mio socket: plain TCP, or TLS through a
//! `rustls::ClientConnection` that this driver drives itself (caller-owned IO, as rustls is
//! designed: ciphertext moves between the socket and rustls, plaintext between rustls and the
//! core).

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;

/// A socket the loop owns.
pub(crate) struct Socket {
    pub(crate) stream: TcpStream,
    pub(crate) addr: SocketAddr,
    /// The TCP connect finished.
    pub(crate) tcp: bool,
    /// The core was told the connection is up (after the TLS handshake, on TLS).
    pub(crate) connected: bool,
    /// Plaintext from the core not yet taken by the socket (or by rustls).
    pub(crate) out: VecDeque<u8>,
    transport: Transport,
}

enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Box<rustls::ClientConnection>),
}

/// What a read hands the loop.
pub(crate) enum Arrived<'a> {
    /// The TLS handshake just finished: the connection is up (`connected` is now set). It
    /// comes before any data, which may follow in the same read.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Up,
    /// Plaintext from the peer.
    Data(&'a [u8]),
}

/// What a read found.
pub(crate) enum ReadOutcome {
    /// Everything available was read; the connection stays open.
    Open,
    /// The peer closed it, or it failed (on TLS, with rustls's reason).
    Closed(Option<String>),
}

impl Socket {
    /// A plain TCP connection being opened.
    pub(crate) fn plain(stream: TcpStream, addr: SocketAddr) -> Socket {
        Socket::with(stream, addr, Transport::Plain)
    }

    /// A TLS connection being opened (the handshake starts once TCP connects).
    #[cfg(feature = "tls")]
    pub(crate) fn tls(
        stream: TcpStream,
        addr: SocketAddr,
        tls: rustls::ClientConnection,
    ) -> Socket {
        Socket::with(stream, addr, Transport::Tls(Box::new(tls)))
    }

    fn with(stream: TcpStream, addr: SocketAddr, transport: Transport) -> Socket {
        Socket {
            stream,
            addr,
            tcp: false,
            connected: false,
            out: VecDeque::new(),
            transport,
        }
    }

    /// Whether the core may be told the connection is up: TCP connected and, on TLS, the
    /// handshake done.
    pub(crate) fn is_ready(&self) -> bool {
        self.tcp
            && match &self.transport {
                Transport::Plain => true,
                #[cfg(feature = "tls")]
                Transport::Tls(t) => !t.is_handshaking(),
            }
    }

    /// Reads until the socket would block, handing what arrived to `deliver`.
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        deliver: &mut dyn FnMut(Arrived<'_>),
    ) -> ReadOutcome {
        match &mut self.transport {
            Transport::Plain => loop {
                match self.stream.read(buf) {
                    Ok(0) => return ReadOutcome::Closed(None),
                    Ok(n) => deliver(Arrived::Data(&buf[..n])),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return ReadOutcome::Open,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return ReadOutcome::Closed(None),
                }
            },
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => loop {
                let eof = match tls.read_tls(&mut self.stream) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return ReadOutcome::Open,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return ReadOutcome::Closed(None),
                };
                if let Err(e) = tls.process_new_packets() {
                    // Tell the server why (the alert rustls queued), then give up.
                    let _ = tls.write_tls(&mut self.stream);
                    return ReadOutcome::Closed(Some(e.to_string()));
                }
                if !self.connected && !tls.is_handshaking() {
                    self.connected = true;
                    deliver(Arrived::Up);
                }
                loop {
                    match tls.reader().read(buf) {
                        Ok(0) => return ReadOutcome::Closed(None),
                        Ok(n) => deliver(Arrived::Data(&buf[..n])),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => return ReadOutcome::Closed(None),
                    }
                }
                if eof {
                    return ReadOutcome::Closed(None);
                }
            },
        }
    }

    /// Writes what is queued (and, on TLS, what rustls has to send, the handshake too) until
    /// the socket would block. `Err` if the connection failed.
    pub(crate) fn write(&mut self) -> Result<(), ()> {
        if !self.tcp {
            return Ok(());
        }
        match &mut self.transport {
            Transport::Plain => {
                while !self.out.is_empty() {
                    let (a, _) = self.out.as_slices();
                    match self.stream.write(a) {
                        Ok(0) => break,
                        Ok(n) => {
                            self.out.drain(..n);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => return Err(()),
                    }
                }
                Ok(())
            }
            #[cfg(feature = "tls")]
            Transport::Tls(tls) => loop {
                // Plaintext goes to rustls only once the handshake is done (it is queued
                // until then), so rustls's buffer limit applies to records only.
                if self.connected {
                    while !self.out.is_empty() {
                        let (a, _) = self.out.as_slices();
                        match tls.writer().write(a) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                self.out.drain(..n);
                            }
                        }
                    }
                }
                if !tls.wants_write() {
                    return Ok(());
                }
                match tls.write_tls(&mut self.stream) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Err(()),
                }
            },
        }
    }
}
