#!/usr/bin/env node
// A NATS subscriber in a few lines of nats.js, to watch what MQTT and AMQP clients send:
//   node examples/nats-sub.mjs 'plant.>' [nats://127.0.0.1:4222]
// Any NATS client does the same; this one needs nothing beyond the gateway's own packages.
import { connect } from "@nats-io/transport-node";

const [subject = ">", server = "nats://127.0.0.1:4222"] = process.argv.slice(2);
const nc = await connect({ servers: server, name: "nats-sub example" });
console.error(`listening on ${subject} at ${server}`);
for await (const m of nc.subscribe(subject)) console.log(`${m.subject} ${m.string()}`);
