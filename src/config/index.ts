/** The configuration: its schema (config/schema.ts; each target type's in src/targets/) and its loading (config/load.ts). */
export * from './load.js';
export * from './schema.js';
