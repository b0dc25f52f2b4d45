/** ../coverage-wait.test.ts again with the queues on BullMQ's PostgreSQL backend (SPEC §12). */
process.env.TEST_QUEUE_BACKEND = 'postgres';
await import('../coverage-wait.test.js');
