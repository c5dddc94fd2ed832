// The admin subjects of admin-subjects.md: `$MQG.admin.<scope>...<op>`. Pure; the admin
// connection subscribes with these and the request handler reads a subject back with them.

export type AdminScope =
  | { readonly kind: "server" }
  | { readonly kind: "ping" }
  | { readonly kind: "account"; readonly account: string };

export type ScopeKind = AdminScope["kind"];

export const serverScopeSubject = (id: string) => `$MQG.admin.server.${id}.>`;
export const PING_SCOPE_SUBJECT = "$MQG.admin.ping.>";
export const accountScopeSubject = (account: string) => `$MQG.admin.account.${account}.>`;

/** The kick reply points operators here for a kick by cid; the op token is left to them. */
export const serverScopeOf = (id: string) => `$MQG.admin.server.${id}`;

/** An account name fits in a subject as one token (NATS names and public keys always do). */
export const isSubjectToken = (name: string) => /^[^\s.*>]+$/.test(name);

/** The scope and op of a request subject; undefined when it is not an admin subject. */
export function parseAdminSubject(subject: string): { scope: AdminScope; op: string } | undefined {
  const tokens = subject.split(".");
  if (tokens[0] !== "$MQG" || tokens[1] !== "admin") return undefined;
  switch (tokens[2]) {
    case "server":
      return tokens.length >= 5 ? { scope: { kind: "server" }, op: tokens.slice(4).join(".") } : undefined;
    case "ping":
      return tokens.length >= 4 ? { scope: { kind: "ping" }, op: tokens.slice(3).join(".") } : undefined;
    case "account": {
      const account = tokens[3];
      return account !== undefined && tokens.length >= 5
        ? { scope: { kind: "account", account }, op: tokens.slice(4).join(".") }
        : undefined;
    }
    default:
      return undefined;
  }
}
