import { readFile } from "node:fs/promises";
import type { Credentials } from "../../config/schema.js";
import type { NatsSeam } from "../client/natsSeam.js";

/**
 * The admin account's name for /healthz: what NATS says of the admin user, else what the
 * config implies (a creds file's JWT names its account's public key; a server without
 * authentication has only the global account), else unknown (null).
 */
export async function adminAccountName(nats: NatsSeam, credentials: Credentials): Promise<string | null> {
  try {
    const reply = await nats.request("$SYS.REQ.USER.INFO", "", 2_000);
    const account = reply.json<{ data?: { account?: string } }>().data?.account;
    if (account) return account;
  } catch {
    // Not allowed to ask, or no system account: fall through to what the config says.
  }
  if (credentials.kind === "creds") {
    const account = await credsAccount(credentials.creds_file).catch(() => undefined);
    if (account) return account;
  }
  return nats.info()?.auth_required ? null : "$G";
}

/** The account public key of a user JWT in a creds file (operator mode). */
async function credsAccount(file: string): Promise<string | undefined> {
  const text = await readFile(file, "utf8");
  const jwt = /-----BEGIN NATS USER JWT-----\s*([^\s-]+)\s*------?END NATS USER JWT------?/.exec(text)?.[1];
  const payload = jwt?.split(".")[1];
  if (!payload) return undefined;
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as {
    iss?: string;
    nats?: { issuer_account?: string };
  };
  // A user signed by a signing key names its account in issuer_account; otherwise the account signed it.
  return claims.nats?.issuer_account ?? claims.iss;
}
