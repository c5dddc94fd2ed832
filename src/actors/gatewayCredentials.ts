import { readFile } from "node:fs/promises";
import { credsAuthenticator, nkeyAuthenticator } from "@nats-io/transport-node";
import type { Credentials as ConfigCredentials } from "../config/schema.js";
import { resolveSecret } from "../config/secrets.js";
import type { Credentials } from "./client/natsBridge.js";

/** The gateway's own users (admin, gateway_users) as bridge credentials, secrets resolved now. */
export async function bridgeCredentials(c: ConfigCredentials): Promise<Credentials> {
  switch (c.kind) {
    case "user":
      return { user: c.user, pass: await secret(c.password) };
    case "token":
      return { token: await secret(c.token) };
    case "creds":
      return {
        authenticator: credsAuthenticator(await readFile(c.creds_file)),
        authenticatorKey: `creds:${c.creds_file}`,
      };
    case "nkey":
      return {
        authenticator: nkeyAuthenticator(new TextEncoder().encode((await readFile(c.nkey_seed_file, "utf8")).trim())),
        authenticatorKey: `nkey:${c.nkey_seed_file}`,
      };
  }
}

async function secret(ref: string): Promise<string> {
  const r = await resolveSecret(ref);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

/** The kind of credentials and whom they name, for a refusal's message: never the secret itself. */
export function describeCredentials(c: ConfigCredentials): string {
  switch (c.kind) {
    case "user":
      return `user ${JSON.stringify(c.user)} with a password`;
    case "token":
      return "a token";
    case "creds":
      return `the creds file ${c.creds_file}`;
    case "nkey":
      return `the nkey seed file ${c.nkey_seed_file}`;
  }
}
