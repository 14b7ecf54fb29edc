/**
 * The ERC-8004 agent registry (an ERC-721 identity registry): an identity's `agent_8004_id` is accepted
 * only when the registry's `ownerOf(id)` is the identity's wallet. Unconfigured (no REGISTRY_RPC_URL /
 * REGISTRY_ADDRESS), claims are recorded unchecked.
 */
import type { PublicClient } from 'viem';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';

const ownerOfAbi = [
  { type: 'function', name: 'ownerOf', stateMutability: 'view', inputs: [{ name: 'tokenId', type: 'uint256' }], outputs: [{ name: '', type: 'address' }] },
] as const;

export class Registry {
  private client: PublicClient | undefined;

  constructor(private config: Pick<Config, 'registryRpcUrl' | 'registryAddress' | 'registryTimeoutMs'>) {}

  /** Refuses unless `wallet` owns agent `agentId`: REGISTRY_OWNER_MISMATCH, _AGENT_NOT_FOUND, _UNAVAILABLE, _RESOLUTION_FAILED. */
  async assertOwner(agentId: string, wallet: string | null, invalid: 'IDENTITY_VALIDATION_FAILED' | 'INVITE_VALIDATION_FAILED' | 'AUTH_REQUEST_VALIDATION_FAILED'): Promise<void> {
    if (!/^\d{1,78}$/.test(agentId)) throw new AppError(invalid, 'agent_8004_id is a decimal token id', { field: 'agent_8004_id', reason: 'format' });
    if (!this.config.registryRpcUrl) return;
    if (!wallet) throw new AppError(invalid, 'Claiming agent_8004_id needs a wallet: attach one first', { field: 'agent_8004_id', reason: 'no_wallet' });
    const owner = await this.ownerOf(BigInt(agentId));
    if (owner.toLowerCase() !== wallet.toLowerCase()) throw new AppError('REGISTRY_OWNER_MISMATCH', `Agent ${agentId} is owned by another wallet`, { agent_8004_id: agentId, owner });
  }

  private async ownerOf(id: bigint): Promise<string> {
    // viem takes seconds to load: loaded on the first claim, not at startup
    const viem = await import('viem');
    this.client ??= viem.createPublicClient({ transport: viem.http(this.config.registryRpcUrl, { timeout: this.config.registryTimeoutMs, retryCount: 0 }) });
    let owner: string;
    try {
      owner = await this.client.readContract({ address: this.config.registryAddress!, abi: ownerOfAbi, functionName: 'ownerOf', args: [id] });
    } catch (e) {
      throw classify(viem, e, id);
    }
    // some registries answer the zero address for an unminted id instead of reverting
    if (owner === viem.zeroAddress) throw new AppError('REGISTRY_AGENT_NOT_FOUND', `Agent ${id} is not in the registry`);
    return owner;
  }
}

function classify({ BaseError, ContractFunctionRevertedError, HttpRequestError, TimeoutError }: typeof import('viem'), e: unknown, id: bigint): AppError {
  if (e instanceof BaseError) {
    // ERC-721 ownerOf reverts for an unminted id; nodes word it differently (geth: execution reverted, ganache: VM Exception ... revert)
    if (e.walk((c) => c instanceof ContractFunctionRevertedError || (c instanceof BaseError && /revert/i.test(c.details)))) return new AppError('REGISTRY_AGENT_NOT_FOUND', `Agent ${id} is not in the registry`);
    if (e.walk((c) => c instanceof HttpRequestError || c instanceof TimeoutError)) return new AppError('REGISTRY_UNAVAILABLE', 'The agent registry did not answer');
    return new AppError('REGISTRY_RESOLUTION_FAILED', `The agent registry answered an error: ${e.shortMessage}`);
  }
  return new AppError('REGISTRY_RESOLUTION_FAILED');
}
