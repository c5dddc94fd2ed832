// An operator-mode nats-server world, made with @nats-io/jwt and @nats-io/nkeys as nsc
// would: an operator, a system account, accounts with JetStream, users with creds files or
// bearer JWTs, and account updates pushed to the server's full resolver
// ($SYS.REQ.CLAIMS.UPDATE), as `nsc push` does.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Account, encodeAccount, encodeOperator, encodeUser, fmtCreds, type User } from "@nats-io/jwt";
import { createAccount, createOperator, createUser, type KeyPair } from "@nats-io/nkeys";
import { connect, credsAuthenticator, type NatsConnection } from "@nats-io/transport-node";

export interface OperatorAccount {
  readonly name: string;
  readonly key: KeyPair;
  readonly pub: string;
  jwt: string;
  claims: Partial<Account>;
}

export interface OperatorUser {
  readonly pub: string;
  readonly jwt: string;
  /** A creds file (JWT and seed), written to disk. */
  readonly credsFile: string;
  readonly creds: Uint8Array;
}

// nsc's defaults (no limit), since claims given here replace encodeAccount's.
const UNLIMITED = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
const JETSTREAM = { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 };

export class OperatorWorld {
  private readonly dir = mkdtempSync(join(tmpdir(), "mqgw-op-"));
  readonly accounts = new Map<string, OperatorAccount>();

  private constructor(
    private readonly operator: KeyPair,
    readonly operatorJwt: string,
    readonly system: OperatorAccount,
  ) {}

  static async create(names: readonly string[], jetstream: readonly string[] = names): Promise<OperatorWorld> {
    const operator = createOperator();
    const sysKey = createAccount();
    const operatorJwt = await encodeOperator("mqgw-test", operator, { system_account: sysKey.getPublicKey() });
    const system: OperatorAccount = {
      name: "SYS",
      key: sysKey,
      pub: sysKey.getPublicKey(),
      jwt: "",
      claims: { limits: { ...UNLIMITED } },
    };
    const world = new OperatorWorld(operator, operatorJwt, system);
    system.jwt = await world.sign(system);
    for (const name of names) {
      const key = createAccount();
      const account: OperatorAccount = {
        name,
        key,
        pub: key.getPublicKey(),
        jwt: "",
        claims: { limits: jetstream.includes(name) ? { ...UNLIMITED, ...JETSTREAM } : { ...UNLIMITED } },
      };
      account.jwt = await world.sign(account);
      world.accounts.set(name, account);
    }
    return world;
  }

  account(name: string): OperatorAccount {
    const a = this.accounts.get(name);
    if (!a) throw new Error(`no account ${name}`);
    return a;
  }

  private sign(a: OperatorAccount, exp?: number): Promise<string> {
    return encodeAccount(a.name, a.key, a.claims, { signer: this.operator, ...(exp !== undefined ? { exp } : {}) });
  }

  /** A user with a creds file; `bearer` also lets its JWT alone log in (an MQTT or AMQP password). */
  async user(account: string, name: string, claims: Partial<User> = {}): Promise<OperatorUser> {
    const a = name === "sys" ? this.system : this.account(account);
    const key = createUser();
    const jwt = await encodeUser(name, key, a.key, claims);
    const creds = fmtCreds(jwt, key);
    const credsFile = join(this.dir, `${name}.creds`);
    writeFileSync(credsFile, creds);
    return { pub: key.getPublicKey(), jwt, credsFile, creds };
  }

  serverConfig(): string {
    const preload = [this.system, ...this.accounts.values()].map((a) => `    ${a.pub}: "${a.jwt}"`).join("\n");
    return `
operator: "${this.operatorJwt}"
system_account: "${this.system.pub}"
resolver: { type: full, dir: "${join(this.dir, "jwt")}", allow_delete: true }
resolver_preload: {
${preload}
}
`;
  }

  /** A connection as the system account's user, for pushing account updates. */
  async systemConnection(url: string): Promise<NatsConnection> {
    const sys = await this.user("SYS", "sys");
    return connect({ servers: url, authenticator: credsAuthenticator(sys.creds) });
  }

  /** Re-signs an account with its changed claims (revocations, an expiry) and pushes it, as `nsc push`. */
  async push(
    sys: NatsConnection,
    name: string,
    change: (claims: Partial<Account>) => void,
    exp?: number,
  ): Promise<void> {
    const a = this.account(name);
    change(a.claims);
    a.jwt = await this.sign(a, exp);
    const reply = await sys.request("$SYS.REQ.CLAIMS.UPDATE", a.jwt, { timeout: 5_000 });
    const answer = reply.json<{ error?: { description?: string } }>();
    if (answer.error) throw new Error(`claims update refused: ${answer.error.description}`);
  }
}
