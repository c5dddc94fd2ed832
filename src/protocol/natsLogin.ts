/**
 * A client's username and password as NATS credentials (CONTRACT "Identity and
 * authorization"): username and password are the NATS user's, a password alone is a
 * token. In operator mode NATS users log in with a JWT, not a password; as nats-server's
 * own MQTT support does, a password that is a NATS user JWT is presented as that JWT
 * (which must allow bearer use: the client holds no seed to sign the server's nonce).
 * The username then only names the client for `routing`. docs/decisions/trust-model.md.
 */
export type LoginCredentials =
  | { readonly kind: "anonymous" }
  | { readonly kind: "user"; readonly user: string; readonly pass: string }
  | { readonly kind: "token"; readonly token: string }
  | { readonly kind: "jwt"; readonly jwt: string };

export function loginCredentials(username: string | undefined, password: string | undefined): LoginCredentials {
  if (password !== undefined && isNatsJwt(password)) return { kind: "jwt", jwt: password };
  if (username !== undefined && username !== "") return { kind: "user", user: username, pass: password ?? "" };
  if (password !== undefined && password !== "") return { kind: "token", token: password };
  return { kind: "anonymous" };
}

/** A JWT (three base64url parts) whose header says NATS's ed25519-nkey algorithm. */
export function isNatsJwt(s: string): boolean {
  if (s.length < 40 || !s.startsWith("eyJ")) return false;
  const parts = s.split(".");
  if (parts.length !== 3 || parts.some((p) => p === "" || !/^[A-Za-z0-9_-]+$/.test(p))) return false;
  try {
    const header = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8")) as { typ?: unknown; alg?: unknown };
    return header.typ === "JWT" && (header.alg === "ed25519-nkey" || header.alg === "ed25519");
  } catch {
    return false;
  }
}
