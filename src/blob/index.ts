/** Opens the blob store the config names: S3 when S3_ENDPOINT is set, else files under DATA_DIR/blobs. */
import { join } from 'node:path';
import type { Config } from '../config.js';
import { FilesystemBlobs } from './filesystem.js';
import type { BlobStore } from './port.js';
import { S3Blobs } from './s3.js';

export async function openBlobs(config: Pick<Config, 'dataDir' | 's3'>): Promise<BlobStore> {
  return config.s3 ? S3Blobs.open(config.s3) : FilesystemBlobs.open(join(config.dataDir, 'blobs'));
}
export type { BlobStore };
