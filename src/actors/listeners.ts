import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer as createTcpServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { Effect, type Scope } from "effect";
import { createWebSocketStream, WebSocketServer } from "ws";

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface TlsFiles {
  readonly cert_file: string;
  readonly key_file: string;
  readonly ca_file?: string | undefined;
  readonly verify_clients?: boolean | undefined;
}

export type OnConnection = (stream: Duplex, remote: string, peer?: TLSSocket) => void;

/** Called with each accepted raw socket before anything else; false: it was refused (socketGate.ts). */
export type Admit = (socket: Socket) => boolean;

const admitAll: Admit = () => true;

/**
 * A TLS handshake or WebSocket upgrade must finish within `limits.connect_timeout` too:
 * the doors' own CONNECT / open timers start only after it, and Node's defaults (120 s
 * handshake, 60 s headers) would let a silent socket hold a place that long.
 */
const DEFAULT_PRE_TIMEOUT_MS = 10_000;

/**
 * Connections the kernel may hold for accept: Node's default is 511, and a reconnect storm
 * (every device of a fleet back at once) overflows it; each dropped SYN is sent again by the
 * client after 1, 3, 7, 15, 31 s, so a storm of 10,000 resumes took 71 s, most of it with
 * the gateway idle and the devices waiting in their TCP backoff. The kernel caps it at
 * net.core.somaxconn (4,096 on current kernels), which is what Go's listeners, nats-server's
 * among them, ask for.
 */
export const LISTEN_BACKLOG = 65_535;

/** A listener that could not bind; `code` is the socket error's (EADDRINUSE, EACCES, ...). */
export class ListenError extends Error {
  constructor(
    message: string,
    readonly at: HostPort,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** A listening server owned by the scope: closing the scope stops accepting. */
const bound = (server: Server | ReturnType<typeof createHttpServer>, at: HostPort, what: string) =>
  Effect.acquireRelease(
    Effect.callback<Server | ReturnType<typeof createHttpServer>, ListenError>((resume) => {
      const onError = (e: NodeJS.ErrnoException) =>
        resume(
          Effect.fail(new ListenError(`cannot listen for ${what} on ${at.host}:${at.port}: ${e.message}`, at, e.code)),
        );
      server.once("error", onError);
      server.listen({ port: at.port, host: at.host, backlog: LISTEN_BACKLOG }, () => {
        server.off("error", onError);
        resume(Effect.succeed(server));
      });
    }),
    (s) => Effect.sync(() => s.close()),
  );

export function remoteOf(socket: Socket): string {
  const host = socket.remoteAddress ?? "";
  return `${host.includes(":") ? `[${host}]` : host}:${socket.remotePort ?? 0}`;
}

export const listenTcp = (
  at: HostPort,
  what: string,
  onConnection: OnConnection,
  admit: Admit = admitAll,
): Effect.Effect<Server, ListenError, Scope.Scope> => {
  const server = createTcpServer({ noDelay: true }, (socket) => {
    if (admit(socket)) onConnection(socket, remoteOf(socket));
  });
  return bound(server, at, what) as Effect.Effect<Server, ListenError, Scope.Scope>;
};

export const listenTls = (
  at: HostPort,
  files: TlsFiles,
  what: string,
  onConnection: OnConnection,
  admit: Admit = admitAll,
  handshakeTimeoutMs = DEFAULT_PRE_TIMEOUT_MS,
): Effect.Effect<Server, ListenError, Scope.Scope> => {
  const server = createTlsServer(
    {
      cert: readFileSync(files.cert_file),
      key: readFileSync(files.key_file),
      ...(files.ca_file ? { ca: readFileSync(files.ca_file) } : {}),
      requestCert: files.verify_clients === true,
      rejectUnauthorized: files.verify_clients === true,
      handshakeTimeout: handshakeTimeoutMs,
    },
    (socket) => onConnection(socket, remoteOf(socket), socket),
  );
  // The raw socket, before the handshake: a client stuck in (or never starting) TLS counts.
  // Destroying it ends the TLS socket wrapped around it, so no secureConnection follows.
  server.on("connection", (raw: Socket) => void admit(raw));
  return bound(server, at, what) as Effect.Effect<Server, ListenError, Scope.Scope>;
};

/** MQTT over WebSocket: path /mqtt, subprotocol "mqtt" (what browsers' MQTT clients ask for). */
export const listenWebSocket = (
  at: HostPort,
  path: string,
  onConnection: OnConnection,
  admit: Admit = admitAll,
  upgradeTimeoutMs: () => number = () => DEFAULT_PRE_TIMEOUT_MS,
): Effect.Effect<unknown, ListenError, Scope.Scope> => {
  const http = createHttpServer((_req, res) => {
    res.writeHead(426, { "content-type": "text/plain" }).end("MQTT over WebSocket: connect to /mqtt\n");
  });
  const wss = new WebSocketServer({
    server: http,
    path,
    handleProtocols: (protocols) => (protocols.has("mqtt") ? "mqtt" : protocols.has("mqttv3.1") ? "mqttv3.1" : false),
  });
  // Counted from the TCP accept, before the HTTP upgrade, like the other listeners.
  // Until the upgrade: ws clears the socket's timeout (setTimeout(0)) when it takes it over.
  http.on("connection", (raw: Socket) => {
    if (admit(raw)) raw.setTimeout(upgradeTimeoutMs(), () => raw.destroy());
  });
  wss.on("connection", (ws, req) => {
    const stream = createWebSocketStream(ws, {});
    onConnection(stream, remoteOf(req.socket));
  });
  return bound(http, at, "MQTT over WebSocket").pipe(
    Effect.tap(() => Effect.addFinalizer(() => Effect.sync(() => wss.close()))),
  );
};
