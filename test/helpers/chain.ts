/**
 * A local EVM chain for the ERC-8004 registry tests: ganache in-process on a free port, with a minimal
 * ERC-721-style registry deployed from hand-written bytecode (there is no compiler in the toolchain).
 *
 * The registry keeps `owner` at storage slot `id` and understands two calls, told apart by calldata size:
 *   36 bytes (`ownerOf(uint256)`: selector + id) -> returns slot[id]; reverts if it is zero (ERC-721: an
 *      unminted id reverts)
 *   68 bytes (any selector + id + owner) -> slot[id] = owner (test-only, unguarded mint)
 *
 * runtime (35 bytes):
 *   00 6004 35      PUSH1 4, CALLDATALOAD            id
 *   03 36 6044 14   CALLDATASIZE, PUSH1 68, EQ       size == 68 ?
 *   07 601c 57      PUSH1 0x1c, JUMPI                -> mint
 *   0a 54 80        SLOAD, DUP1                      owner, owner
 *   0c 6013 57      PUSH1 0x13, JUMPI                owner != 0 -> found
 *   0f 6000 80 fd   PUSH1 0, DUP1, REVERT            revert(0, 0)
 *   13 5b 6000 52   JUMPDEST, PUSH1 0, MSTORE        found: mem[0] = owner
 *   17 6020 6000 f3 PUSH1 32, PUSH1 0, RETURN        return mem[0..32]
 *   1c 5b 6024 35   JUMPDEST, PUSH1 36, CALLDATALOAD mint: owner
 *   20 90 55 00     SWAP1, SSTORE, STOP              slot[id] = owner
 * init (11 bytes): PUSH1 35, DUP1, PUSH1 11, PUSH1 0, CODECOPY, PUSH1 0, RETURN -> deploys the runtime
 */
import ganache from 'ganache';
import { createPublicClient, createWalletClient, http, type Address, type Hex } from 'viem';

const RUNTIME = '6004353660441460' + '1c57548060135760' + '0080fd5b60005260' + '206000f35b602435' + '905500';
const INIT = '602380600b6000396000f3';

export interface Chain {
  url: string;
  registry: Address;
  mint(id: bigint, owner: Address): Promise<void>;
  stop(): Promise<void>;
}

export async function startChain(): Promise<Chain> {
  const server = ganache.server({ logging: { quiet: true }, chain: { chainId: 1337 }, wallet: { totalAccounts: 1 }, miner: { instamine: 'eager' } });
  await server.listen(0);
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const pub = createPublicClient({ transport: http(url), pollingInterval: 20 });
  const [from] = (await pub.request({ method: 'eth_accounts' } as never)) as Address[];
  const wallet = createWalletClient({ account: from, transport: http(url) });
  const send = async (tx: { to?: Address; data: Hex }) => {
    const hash = await wallet.sendTransaction({ ...tx, chain: null });
    const r = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (r.status !== 'success') throw new Error(`transaction failed: ${hash}`);
    return r;
  };
  const deployed = await send({ data: `0x${INIT}${RUNTIME}` });
  const registry = deployed.contractAddress!;
  return {
    url,
    registry,
    async mint(id, owner) {
      await send({ to: registry, data: `0x00000000${id.toString(16).padStart(64, '0')}${owner.slice(2).toLowerCase().padStart(64, '0')}` });
    },
    stop: () => server.close(),
  };
}
