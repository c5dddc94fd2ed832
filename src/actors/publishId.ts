import { randomBytes } from "node:crypto";

/**
 * The `Nats-Msg-Id` of a new publish (docs/decisions/publish-identity.md): a prefix of 96
 * random bits drawn once per process, then a counter. Unique across restarts (a new
 * process draws a new prefix, so a restarted gateway's ids never meet its old ones in a
 * stream's duplicate window) and per publish, whatever its packet id and payload. About
 * 50 ns: no hash, no clock. A resend reuses the id its first copy had (inboundState.ts).
 */
const PREFIX = randomBytes(12).toString("base64url");
let counter = 0;

export function newPublishId(): string {
  return PREFIX + (counter++).toString(36);
}

/**
 * An id unique across gateways and restarts for anything else that needs one (a fresh
 * session's epoch): the same prefix and counter, so no random draw (and no getpid, which
 * OpenSSL makes per draw) per connect.
 */
export const newUniqueId: () => string = newPublishId;
