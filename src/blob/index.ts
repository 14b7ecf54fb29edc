/** Opens the blob store the config names: S3 when S3_ENDPOINT is set, else files under DATA_DIR/blobs. */
import { join } from 'node:path';
import type { Config } from '../config.js';
import { FilesystemBlobs } from './filesystem.js';
import type { BlobStore } from './port.js';

export async function openBlobs(config: Pick<Config, 'dataDir' | 's3'>): Promise<BlobStore> {
  // the S3 client is loaded only where S3 is configured: it costs startup time everywhere else
  if (config.s3) return (await import('./s3.js')).S3Blobs.open(config.s3);
  return FilesystemBlobs.open(join(config.dataDir, 'blobs'));
}
export type { BlobStore };
