import { encodeUser } from "@nats-io/jwt";
import { createAccount, createUser } from "@nats-io/nkeys";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isNatsJwt, loginCredentials } from "../../src/protocol/natsLogin.js";

describe("a client's login as NATS credentials", () => {
  it("follows the CONTRACT: user and password, a password alone a token, nothing anonymous", () => {
    expect(loginCredentials("u", "p")).toEqual({ kind: "user", user: "u", pass: "p" });
    expect(loginCredentials("u", undefined)).toEqual({ kind: "user", user: "u", pass: "" });
    expect(loginCredentials(undefined, "t")).toEqual({ kind: "token", token: "t" });
    expect(loginCredentials("", "t")).toEqual({ kind: "token", token: "t" });
    expect(loginCredentials(undefined, undefined)).toEqual({ kind: "anonymous" });
  });

  it("a NATS user JWT as the password is presented as that JWT, with or without a username", async () => {
    const jwt = await encodeUser("u", createUser(), createAccount(), { bearer_token: true });
    expect(isNatsJwt(jwt)).toBe(true);
    expect(loginCredentials("sensor-1", jwt)).toEqual({ kind: "jwt", jwt });
    expect(loginCredentials(undefined, jwt)).toEqual({ kind: "jwt", jwt });
  });

  it("no other password is taken for a JWT (any string, and other JWTs)", () => {
    fc.assert(
      fc.property(fc.string(), (s) => !isNatsJwt(s)),
      { numRuns: 5000 },
    );
    const hs256 = `${Buffer.from(JSON.stringify({ typ: "JWT", alg: "HS256" })).toString("base64url")}.e30.c2ln`;
    expect(isNatsJwt(hs256.padEnd(60, "x"))).toBe(false);
  });
});
