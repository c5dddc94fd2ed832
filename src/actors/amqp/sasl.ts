import type { SaslMechanism } from "../../config/schema.js";
import type { Login } from "../../machines/amqpConnection.js";
import type { ServerMechanism } from "./rhea.js";

/**
 * The SASL mechanisms the gateway offers. Neither checks a password itself: the login
 * becomes the client's own NATS connection and NATS decides (CONTRACT, "Identity and
 * authorization"); the connection actor answers with the outcome of that connect.
 */
export type Authenticate = (login: Login) => Promise<boolean>;

/** RFC 4616: [authzid] NUL authcid NUL passwd. A password alone is a NATS token. */
export function plainLogin(response: Buffer | undefined): Login | undefined {
  if (!response) return undefined;
  const first = response.indexOf(0);
  const second = first < 0 ? -1 : response.indexOf(0, first + 1);
  if (first < 0 || second < 0 || response.indexOf(0, second + 1) >= 0) return undefined;
  const user = response.toString("utf8", first + 1, second);
  const pass = response.toString("utf8", second + 1);
  if (user === "" && pass === "") return { credentials: {}, mechanism: "PLAIN" };
  if (user === "") return { credentials: { token: pass }, mechanism: "PLAIN" };
  return { credentials: { user, pass }, username: user, mechanism: "PLAIN" };
}

function mechanism(
  login: (response: Buffer | undefined) => Login | undefined,
  authenticate: Authenticate,
): () => ServerMechanism {
  return () => {
    const m: ServerMechanism = {
      outcome: undefined,
      username: undefined,
      start: async (response) => {
        const l = login(response);
        // rhea sends a challenge while `outcome` is undefined; SASL PLAIN and ANONYMOUS have none.
        m.outcome = l ? await authenticate(l) : false;
        m.username = l?.username;
      },
    };
    return m;
  };
}

const LOGINS: Record<SaslMechanism, (response: Buffer | undefined) => Login | undefined> = {
  PLAIN: plainLogin,
  // The trace string an ANONYMOUS client may send is not an identity.
  ANONYMOUS: () => ({ credentials: {}, mechanism: "ANONYMOUS" }),
};

/** The mechanisms as configured, in the configured order (the order the client sees). */
export function saslMechanisms(
  offered: readonly SaslMechanism[],
  authenticate: Authenticate,
): Record<string, () => ServerMechanism> {
  const out: Record<string, () => ServerMechanism> = {};
  for (const name of offered) out[name] = mechanism(LOGINS[name], authenticate);
  return out;
}
