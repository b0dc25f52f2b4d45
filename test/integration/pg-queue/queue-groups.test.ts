/** ../queue-groups.test.ts again with the queues on BullMQ's PostgreSQL backend. */
process.env.TEST_QUEUE_BACKEND = 'postgres';
await import('../queue-groups.test.js');
