import { TLSSocket } from "node:tls";
import type { SaslMechanism } from "../../config/schema.js";
import type { Login } from "../../machines/amqpConnection.js";
import { loginCredentials } from "../../protocol/natsLogin.js";
import type { ServerMechanism } from "../../vendor/rhea.js";
import { bridgeCredentialsOf } from "../client/natsBridge.js";

/**
 * The SASL mechanisms the gateway offers. Neither checks a password itself: the login
 * becomes the client's own NATS connection and NATS decides (CONTRACT, "Identity and
 * authorization"); the connection actor answers with the outcome of that connect.
 */
export type Authenticate = (login: Login) => Promise<boolean>;
/** Told when a mechanism refuses a response itself, without asking NATS. */
export type Refuse = (reason: string) => void;

/** RFC 4616: [authzid] NUL authcid NUL passwd. A password alone is a NATS token. */
export function plainLogin(response: Buffer | undefined): Login | undefined {
  if (!response) return undefined;
  const first = response.indexOf(0);
  const second = first < 0 ? -1 : response.indexOf(0, first + 1);
  if (first < 0 || second < 0 || response.indexOf(0, second + 1) >= 0) return undefined;
  const user = response.toString("utf8", first + 1, second);
  const pass = response.toString("utf8", second + 1);
  const credentials = bridgeCredentialsOf(loginCredentials(user, pass));
  return { credentials, ...(user !== "" ? { username: user } : {}), mechanism: "PLAIN" };
}

function mechanism(
  name: string,
  login: (response: Buffer | undefined) => Login | undefined,
  authenticate: Authenticate,
  refuse: Refuse,
): () => ServerMechanism {
  return () => {
    const m: ServerMechanism = {
      outcome: undefined,
      username: undefined,
      start: async (response) => {
        const l = login(response);
        // The connection must hear of a refusal NATS never sees, or a client that ignores
        // the outcome stays until limits.connect_timeout.
        if (!l) refuse(`${name} response not accepted`);
        // rhea sends a challenge while `outcome` is undefined; SASL PLAIN and ANONYMOUS have none.
        m.outcome = l ? await authenticate(l) : false;
        m.username = l?.username;
      },
    };
    return m;
  };
}

/**
 * SASL EXTERNAL (RFC 4422 appendix A) for a client whose certificate TLS verified
 * (docs/decisions/amqp-sasl-external.md). The gateway cannot show that certificate to
 * NATS, so the NATS connection is made without credentials, as for an MQTT client that
 * logs in over the verifying TLS listener with no username; the certificate's name is the
 * username the routing table and the logs see. The response is an authorization identity:
 * empty, or the certificate's own name (the gateway cannot vouch for any other).
 */
export function externalLogin(certificate: string | undefined): (response: Buffer | undefined) => Login | undefined {
  return (response) => {
    if (certificate === undefined) return undefined;
    const authzid = response?.toString("utf8") ?? "";
    if (authzid !== "" && authzid !== certificate) return undefined;
    return { credentials: {}, username: certificate, mechanism: "EXTERNAL" };
  };
}

/** The name of a verified client certificate: its subject CN, else its first DNS, email or URI name. */
export function certificateName(cert: {
  readonly subject?: Readonly<Record<string, string | string[] | undefined>> | undefined;
  readonly subjectaltname?: string | undefined;
}): string | undefined {
  const cn = cert.subject?.CN;
  const first = Array.isArray(cn) ? cn[0] : cn;
  if (first) return first;
  for (const entry of (cert.subjectaltname ?? "").split(", ")) {
    const m = /^(?:DNS|email|URI):(.+)$/.exec(entry);
    if (m) return m[1];
  }
  return undefined;
}

/** The client certificate's name when the socket is TLS and verified it; undefined otherwise. */
export function verifiedCertificateName(socket: unknown): string | undefined {
  if (!(socket instanceof TLSSocket) || !socket.authorized) return undefined;
  return certificateName(socket.getPeerCertificate());
}

const LOGINS: Record<Exclude<SaslMechanism, "EXTERNAL">, (response: Buffer | undefined) => Login | undefined> = {
  PLAIN: plainLogin,
  // The trace string an ANONYMOUS client may send is not an identity.
  ANONYMOUS: () => ({ credentials: {}, mechanism: "ANONYMOUS" }),
};

/**
 * The mechanisms as configured, in the configured order (the order the client sees).
 * EXTERNAL is offered only with a verified client certificate; a client that picks it
 * anyway gets the SASL outcome `auth` (rhea.ts answers a mechanism not offered so, and
 * tells the connection through `serverContainer`'s `unoffered`).
 */
export function saslMechanisms(
  offered: readonly SaslMechanism[],
  authenticate: Authenticate,
  certificate?: string,
  refuse: Refuse = () => {},
): Record<string, () => ServerMechanism> {
  const out: Record<string, () => ServerMechanism> = {};
  for (const name of offered) {
    if (name !== "EXTERNAL") out[name] = mechanism(name, LOGINS[name], authenticate, refuse);
    else if (certificate !== undefined) out[name] = mechanism(name, externalLogin(certificate), authenticate, refuse);
  }
  // rhea offers ANONYMOUS when given no mechanism at all: with EXTERNAL alone on a socket
  // without a certificate, offer EXTERNAL and refuse it instead.
  if (Object.keys(out).length === 0)
    out.EXTERNAL = mechanism("EXTERNAL", externalLogin(undefined), authenticate, refuse);
  return out;
}
