// produce_consume.mjs: KafkaJS 2.2.4 produce, then consume in a group with a commit after each record.
//   node produce_consume.mjs BOOTSTRAP TOPIC GROUP V1,V2,...
// Sends the values to partition 0 (acks=-1), then reads as many records as it sent in GROUP (from the
// beginning when the group has no offset; 6 s session), committing offset+1 after each one. Prints one
// JSON line {"records": [[offset, "value"], ...]}; gives up after 90 s. Exit 0 iff as many were read.
// KafkaJS comes from $KAFKA_TEST_CLIENTS/node/node_modules; its logs go to stderr.
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { join } from 'node:path'

const [bootstrap, topic, group, csv] = process.argv.slice(2)
if (!csv) {
  console.error('usage: node produce_consume.mjs BOOTSTRAP TOPIC GROUP V1,V2,...')
  process.exit(2)
}
const values = csv.split(',')
const base = process.env.KAFKA_TEST_CLIENTS || join(homedir(), '.cache', 'groupd-clients')
const { Kafka, logLevel } = createRequire(join(base, 'node', 'package.json'))('kafkajs')
const logCreator = () => ({ namespace, label, log }) => console.error(label, namespace, log.message)
const kafka = new Kafka({ clientId: 'produce-consume', brokers: [bootstrap], logLevel: logLevel.WARN, logCreator })

const producer = kafka.producer()
await producer.connect()
await producer.send({ topic, acks: -1, messages: values.map(value => ({ value, partition: 0 })) })
await producer.disconnect()

const read = []
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 1000 })
await consumer.connect()
await consumer.subscribe({ topic, fromBeginning: true })
let done
const finished = new Promise(resolve => { done = resolve })
const timer = setTimeout(() => done(), 90_000)
await consumer.run({
  autoCommit: false,
  eachMessage: async ({ partition, message }) => {
    if (read.length >= values.length) return
    read.push([Number(message.offset), message.value.toString()])
    await consumer.commitOffsets([{ topic, partition, offset: String(BigInt(message.offset) + 1n) }])
    if (read.length === values.length) done()
  }
})
await finished
clearTimeout(timer)
await consumer.disconnect()
console.log(JSON.stringify({ records: read }))
process.exit(read.length === values.length ? 0 : 1)
