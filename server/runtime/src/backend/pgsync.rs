//! A synchronous PostgreSQL connection that needs no runtime: `tokio-postgres`'s client and
//! connection polled on the calling thread, over a non-blocking socket, waiting in `poll(2)`
//! when neither can go on. The `postgres` crate instead drives each connection with a
//! runtime of its own, which cannot start on a thread of the server's async runtime, so every
//! call from an HTTP worker had to be handed to another thread and back (half the server's CPU
//! per call, see BENCHMARKS.md); this connection runs a call on whichever thread has it.
//!
//! The executor is the smallest that is correct here: one request at a time, a waker that
//! only notes that it was woken (by the channels between the client and its connection), and
//! the socket as the one other source of progress. Connecting follows the driver's own order
//! of hosts, `hostaddr` and ports; errors are the driver's, or the socket's when it never
//! connected.

use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::Host;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::{BorrowToSql, ToSql};
use tokio_postgres::{Config, Error, Row, RowStream, SimpleQueryMessage, Statement, ToStatement};
use tokio_postgres_rustls::MakeRustlsConnect;

type TlsStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
type Connection = tokio_postgres::Connection<Socket, TlsStream>;

/// Why a connection could not be made: the socket's error when no server answered, else the
/// driver's (authentication, TLS, the server's refusal).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No address of any host accepted a connection.
    #[error("error connecting to server: {0}")]
    Io(#[from] io::Error),
    /// The server answered and refused, or the start-up failed.
    #[error(transparent)]
    Pg(#[from] Error),
}

/// A connected socket, TCP or Unix.
enum Stream {
    Tcp(std::net::TcpStream),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

/// The socket as the driver reads and writes it: non-blocking, `Pending` when it would block
/// (the executor then waits in `poll(2)`; no waker is kept).
pub struct Socket {
    stream: Stream,
    state: Arc<SocketState>,
}

/// What the socket tells the executor, and the executor the socket.
#[derive(Default)]
struct SocketState {
    /// Set when a write would block, so that the executor waits for room as well.
    blocked_write: AtomicBool,
    /// Set when a read found the socket empty: it would block, or it returned less than it
    /// asked for, which leaves nothing behind it. The next read is `Pending` without a system
    /// call until the executor's `poll(2)` says the socket is readable again. This saves the
    /// read after each answer and the one before each wait that a driver reading until it
    /// would block makes: two of the five system calls a statement took on this side.
    drained: AtomicBool,
}

impl Socket {
    fn io(&mut self) -> &mut dyn ReadWrite {
        match &mut self.stream {
            Stream::Tcp(s) => s,
            #[cfg(unix)]
            Stream::Unix(s) => s,
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// `r` as a poll: `Pending` on `WouldBlock`, retried on `Interrupted`.
fn nonblocking<T>(mut r: impl FnMut() -> io::Result<T>) -> Poll<io::Result<T>> {
    loop {
        match r() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            other => return Poll::Ready(other),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.state.drained.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        let asked = buf.remaining();
        let read = nonblocking(|| this.io().read(buf.initialize_unfilled()));
        let n = match read {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                this.state.drained.store(true, Ordering::Relaxed);
                return Poll::Pending;
            }
        };
        if n < asked {
            this.state.drained.store(true, Ordering::Relaxed);
        }
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = nonblocking(|| this.io().write(data));
        if written.is_pending() {
            this.state.blocked_write.store(true, Ordering::Relaxed);
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shut = match &self.stream {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
        Poll::Ready(shut.or_else(|e| match e.kind() {
            io::ErrorKind::NotConnected => Ok(()),
            _ => Err(e),
        }))
    }
}

/// A waker that notes that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Where the connection's server is, to send it a cancel request on a socket of its own.
#[derive(Clone)]
enum Address {
    Tcp(std::net::SocketAddr, String),
    #[cfg(unix)]
    Unix(std::path::PathBuf),
}

/// One connection to a PostgreSQL server, used from one thread at a time.
pub struct Client {
    client: tokio_postgres::Client,
    driver: Driver,
}

impl Drop for Client {
    /// Says goodbye to the server (`Terminate`), as the `postgres` crate does, without
    /// waiting: the connection writes it if the socket takes it at once.
    fn drop(&mut self) {
        let Some(connection) = self.driver.connection.as_mut() else {
            return;
        };
        self.client.__private_api_close();
        let mut cx = Context::from_waker(&self.driver.wait.waker);
        for _ in 0..3 {
            if connection.as_mut().poll(&mut cx).is_ready() {
                break;
            }
        }
    }
}

/// What drives a connection: the driver's half, and what the executor waits with.
struct Driver {
    /// `None` once the connection ended (the server closed it, or it failed): dropping it
    /// closes the client's channel, so that every request after that fails at once.
    connection: Option<Pin<Box<Connection>>>,
    wait: Wait,
    address: Address,
}

/// A socket's second handle, to wait on, and the flags the executor reads.
struct Wait {
    polled: Stream,
    state: Arc<SocketState>,
    woken: Arc<Flag>,
    waker: Waker,
}

/// A socket open to `address` for the driver, its `Wait`, and the TLS connector for the
/// address's host name.
fn dial(
    address: &Address,
    timeout: Option<Duration>,
    tls: &MakeRustlsConnect,
) -> Result<(Socket, Wait, TlsConnector), ConnectError> {
    let stream = Stream::open(address, timeout)?;
    let polled = stream.try_clone()?;
    let state = Arc::new(SocketState::default());
    let socket = Socket {
        stream,
        state: state.clone(),
    };
    let hostname = match address {
        Address::Tcp(_, name) => name.as_str(),
        #[cfg(unix)]
        Address::Unix(_) => "",
    };
    let mut make = tls.clone();
    let connector = MakeTlsConnect::<Socket>::make_tls_connect(&mut make, hostname)
        .map_err(|e| ConnectError::Io(io::Error::other(e)))?;
    let woken = Arc::new(Flag(AtomicBool::new(false)));
    let wait = Wait {
        polled,
        state,
        waker: Waker::from(woken.clone()),
        woken,
    };
    Ok((socket, wait, connector))
}

type TlsConnector = <MakeRustlsConnect as MakeTlsConnect<Socket>>::TlsConnect;

/// Runs `fut` to its end on this thread: `connection` (when there is one) is polled beside it,
/// and when neither can go on without the socket, the thread waits for the socket in
/// `poll(2)` until `deadline`. A connection that ends is dropped, which ends `fut` too.
fn drive<T>(
    fut: impl Future<Output = Result<T, Error>>,
    mut connection: Option<&mut Option<Pin<Box<Connection>>>>,
    wait: &Wait,
    deadline: Option<Instant>,
) -> Result<T, Error> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(&wait.waker);
    loop {
        wait.woken.0.store(false, Ordering::Release);
        wait.state.blocked_write.store(false, Ordering::Relaxed);
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        if let Some(slot) = connection.as_mut() {
            let polled = match slot.as_mut() {
                Some(c) => c.as_mut().poll(&mut cx),
                // Ended: the request failed at once, or its answer will never come.
                None => return Err(Error::__private_api_timeout()),
            };
            if let Poll::Ready(ended) = polled {
                **slot = None;
                ended?;
            }
            // What the connection just read may have finished the request.
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
        }
        if wait.woken.0.load(Ordering::Acquire) {
            continue;
        }
        wait.until_ready(deadline)?;
    }
}

impl Wait {
    /// Waits until the socket can be read (or written, when a write would block), or fails
    /// with the driver's timeout at `deadline`.
    #[cfg(unix)]
    fn until_ready(&self, deadline: Option<Instant>) -> Result<(), Error> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use std::os::fd::AsFd;
        let fd = match &self.polled {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        };
        let mut flags = PollFlags::IN;
        if self.state.blocked_write.load(Ordering::Relaxed) {
            flags |= PollFlags::OUT;
        }
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::__private_api_timeout());
                }
                Some(Timespec::try_from(left).unwrap_or(Timespec {
                    tv_sec: i64::MAX,
                    tv_nsec: 0,
                }))
            }
            None => None,
        };
        let mut fds = [PollFd::new(&fd, flags)];
        let polled = poll(&mut fds, timeout.as_ref());
        // Whatever woke it, the next read asks the socket.
        self.state.drained.store(false, Ordering::Relaxed);
        match polled {
            Ok(0) if deadline.is_some_and(|d| Instant::now() >= d) => {
                Err(Error::__private_api_timeout())
            }
            // Ready, interrupted or spurious: the caller polls again and finds out.
            _ => Ok(()),
        }
    }

    /// Without `poll(2)`, a short sleep stands in for the wait.
    #[cfg(not(unix))]
    fn until_ready(&self, deadline: Option<Instant>) -> Result<(), Error> {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::__private_api_timeout());
        }
        std::thread::sleep(Duration::from_micros(50));
        self.state.drained.store(false, Ordering::Relaxed);
        Ok(())
    }
}

impl Stream {
    /// A second handle on the same socket.
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    /// Opens a socket to `address`, within `timeout` for TCP, ready for the driver.
    fn open(address: &Address, timeout: Option<Duration>) -> io::Result<Stream> {
        let stream = match address {
            Address::Tcp(addr, _) => {
                let s = match timeout {
                    Some(t) => std::net::TcpStream::connect_timeout(addr, t)?,
                    None => std::net::TcpStream::connect(addr)?,
                };
                s.set_nodelay(true)?;
                s.set_nonblocking(true)?;
                Stream::Tcp(s)
            }
            #[cfg(unix)]
            Address::Unix(path) => {
                let s = std::os::unix::net::UnixStream::connect(path)?;
                s.set_nonblocking(true)?;
                Stream::Unix(s)
            }
        };
        Ok(stream)
    }
}

/// The addresses to try for `config`, in the driver's order: each host (or its `hostaddr`)
/// with its port (or the one port for all), each name resolved to all its addresses.
fn addresses(config: &Config) -> Vec<io::Result<Address>> {
    let hosts = config.get_hosts();
    let hostaddrs = config.get_hostaddrs();
    let ports = config.get_ports();
    let mut out = Vec::new();
    for i in 0..hosts.len().max(hostaddrs.len()) {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let name = match hosts.get(i) {
            Some(Host::Tcp(h)) => h.clone(),
            _ => String::new(),
        };
        if let Some(ip) = hostaddrs.get(i) {
            out.push(Ok(Address::Tcp((*ip, port).into(), name)));
            continue;
        }
        match hosts.get(i) {
            Some(Host::Tcp(h)) => {
                match std::net::ToSocketAddrs::to_socket_addrs(&(h.as_str(), port)) {
                    Ok(all) => out.extend(all.map(|a| Ok(Address::Tcp(a, name.clone())))),
                    Err(e) => out.push(Err(e)),
                }
            }
            #[cfg(unix)]
            Some(Host::Unix(dir)) => {
                out.push(Ok(Address::Unix(dir.join(format!(".s.PGSQL.{port}")))));
            }
            #[cfg(not(unix))]
            Some(_) => {}
            None => {}
        }
    }
    out
}

impl Client {
    /// Connects with `config`, TLS as `tls` offers it, trying each address in turn.
    pub fn connect(config: &Config, tls: &MakeRustlsConnect) -> Result<Client, ConnectError> {
        let mut last = ConnectError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no host to connect to",
        ));
        for address in addresses(config) {
            let attempt = address
                .map_err(ConnectError::Io)
                .and_then(|a| Client::connect_to(config, tls, a));
            match attempt {
                Ok(client) => return Ok(client),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn connect_to(
        config: &Config,
        tls: &MakeRustlsConnect,
        address: Address,
    ) -> Result<Client, ConnectError> {
        let timeout = config.get_connect_timeout().copied();
        let (socket, wait, connector) = dial(&address, timeout, tls)?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let (client, connection) =
            drive(config.connect_raw(socket, connector), None, &wait, deadline)?;
        Ok(Client {
            client,
            driver: Driver {
                connection: Some(Box::pin(connection)),
                wait,
                address,
            },
        })
    }

    /// Prepares `query`.
    pub fn prepare(&mut self, query: &str) -> Result<Statement, Error> {
        self.driver.run(self.client.prepare(query), None)
    }

    /// Runs `statement` and returns how many rows it changed.
    pub fn execute<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        self.driver
            .run(self.client.execute(statement, params), None)
    }

    /// Runs `statement` and returns its rows.
    pub fn query<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        self.driver.run(self.client.query(statement, params), None)
    }

    /// Runs `statement` and returns its one row, or none.
    pub fn query_opt<T: ?Sized + ToStatement>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        self.driver
            .run(self.client.query_opt(statement, params), None)
    }

    /// Runs `statement` and hands each row to `each` as it arrives.
    pub fn query_each<P, I>(
        &mut self,
        statement: &Statement,
        params: I,
        each: &mut dyn FnMut(Row),
    ) -> Result<(), Error>
    where
        P: BorrowToSql,
        I: IntoIterator<Item = P>,
        I::IntoIter: ExactSizeIterator,
    {
        let client = &self.client;
        let rows = async move {
            let mut rows = pin!(client.query_raw(statement, params).await?);
            while let Some(row) = std::future::poll_fn(|cx| next(rows.as_mut(), cx)).await {
                each(row?);
            }
            Ok(())
        };
        self.driver.run(rows, None)
    }

    /// Runs the statements of `query`, without parameters.
    pub fn batch_execute(&mut self, query: &str) -> Result<(), Error> {
        self.driver.run(self.client.batch_execute(query), None)
    }

    /// Runs `query` through the simple protocol.
    pub fn simple_query(&mut self, query: &str) -> Result<Vec<SimpleQueryMessage>, Error> {
        self.driver.run(self.client.simple_query(query), None)
    }

    /// Whether the server answers a round trip within `timeout`.
    pub fn is_valid(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        self.driver
            .run(self.client.simple_query(""), Some(deadline))
            .map(drop)
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.driver.connection.is_none() || self.client.is_closed()
    }

    /// What cancels the statement running on this connection, from another thread.
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken {
            token: self.client.cancel_token(),
            address: self.driver.address.clone(),
        }
    }
}

impl Driver {
    /// Runs `fut`, one of this connection's requests, to its end.
    fn run<T>(
        &mut self,
        fut: impl Future<Output = Result<T, Error>>,
        deadline: Option<Instant>,
    ) -> Result<T, Error> {
        drive(fut, Some(&mut self.connection), &self.wait, deadline)
    }
}

/// The next item of `stream`.
fn next(stream: Pin<&mut RowStream>, cx: &mut Context<'_>) -> Poll<Option<Result<Row, Error>>> {
    futures_core::Stream::poll_next(stream, cx)
}

/// Cancels what runs on a connection, with a cancel request on a socket of its own.
pub struct CancelToken {
    token: tokio_postgres::CancelToken,
    address: Address,
}

impl CancelToken {
    /// Sends the cancel request, TLS as `tls` offers it, waiting at most `timeout`.
    pub fn cancel_query(
        &self,
        tls: &MakeRustlsConnect,
        timeout: Duration,
    ) -> Result<(), ConnectError> {
        let (socket, wait, connector) = dial(&self.address, Some(timeout), tls)?;
        let deadline = Some(Instant::now() + timeout);
        drive(
            self.token.cancel_query_raw(socket, connector),
            None,
            &wait,
            deadline,
        )?;
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// The driver's side of a socket pair, its `Wait`, and the peer's end.
    fn pair() -> (Socket, Wait, UnixStream) {
        let (ours, peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let state = Arc::new(SocketState::default());
        let polled = Stream::Unix(ours.try_clone().unwrap());
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        let wait = Wait {
            polled,
            state: state.clone(),
            waker: Waker::from(woken.clone()),
            woken,
        };
        let socket = Socket {
            stream: Stream::Unix(ours),
            state,
        };
        (socket, wait, peer)
    }

    /// One read into a buffer of `size` bytes: what it read, or `None` when `Pending`.
    fn read(socket: &mut Socket, wait: &Wait, size: usize) -> Option<Vec<u8>> {
        let mut bytes = vec![0; size];
        let mut buf = ReadBuf::new(&mut bytes);
        let mut cx = Context::from_waker(&wait.waker);
        match Pin::new(socket).poll_read(&mut cx, &mut buf) {
            Poll::Ready(r) => {
                r.unwrap();
                Some(buf.filled().to_vec())
            }
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_read_that_emptied_the_socket_waits_for_poll_before_the_next() {
        let (mut socket, wait, mut peer) = pair();
        let deadline = Some(Instant::now() + Duration::from_secs(5));
        peer.write_all(b"one").unwrap();
        assert_eq!(read(&mut socket, &wait, 16).as_deref(), Some(&b"one"[..]));
        // Short: the socket was emptied, so what arrives next waits for poll(2) to say so.
        peer.write_all(b"two").unwrap();
        assert_eq!(read(&mut socket, &wait, 16), None);
        wait.until_ready(deadline).unwrap();
        assert_eq!(read(&mut socket, &wait, 16).as_deref(), Some(&b"two"[..]));
        // A read that filled its buffer may have left more behind: the next one asks.
        peer.write_all(b"threefour").unwrap();
        wait.until_ready(deadline).unwrap();
        assert_eq!(read(&mut socket, &wait, 5).as_deref(), Some(&b"three"[..]));
        assert_eq!(read(&mut socket, &wait, 16).as_deref(), Some(&b"four"[..]));
        // Nothing more came: the next read waits for poll(2), which times out here, and a
        // read that then would block waits for poll(2) too.
        assert_eq!(read(&mut socket, &wait, 16), None);
        let soon = Some(Instant::now() + Duration::from_millis(10));
        assert!(wait.until_ready(soon).is_err());
        assert!(!socket.state.drained.load(Ordering::Relaxed));
        assert_eq!(read(&mut socket, &wait, 16), None);
        assert!(socket.state.drained.load(Ordering::Relaxed));
        // An end is read as one.
        drop(peer);
        wait.until_ready(deadline).unwrap();
        assert_eq!(read(&mut socket, &wait, 16).as_deref(), Some(&b""[..]));
    }
}
