// On demand: per-call cost of the topic mapping on the publish path (`npm run build` first).
import { publishTopicToSubject, subjectToTopic } from "../dist/protocol/topic.js";

const topics = ["a/b/c", "plant/line1/temp", "x/y/z"];
const subjects = ["a.b.c", "plant.line1.temp", "x.y.z"];
for (let i = 0; i < 200_000; i++) publishTopicToSubject(topics[i % 3]);
const n = 1_000_000;
let t = performance.now();
for (let i = 0; i < n; i++) publishTopicToSubject(topics[i % 3]);
console.log(`publishTopicToSubject: ${(((performance.now() - t) * 1000) / n).toFixed(3)} µs/call`);
t = performance.now();
for (let i = 0; i < n; i++) subjectToTopic(subjects[i % 3]);
console.log(`subjectToTopic: ${(((performance.now() - t) * 1000) / n).toFixed(3)} µs/call`);
