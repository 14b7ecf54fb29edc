export interface Role {
  id: string;
  name: string;
  purpose: string | null;
  domains: string[];
  duties: string[];
  created_at: string;
  updated_at: string;
}

export interface Ring {
  id: string;
  name: string;
  purpose: string | null;
  /** identity ids */
  members: string[];
  created_at: string;
  updated_at: string;
}

export interface Fill {
  id: string;
  identity_id: string;
  role_id: string;
  created_at: string;
}

/** Role and ring names are unique and matched without regard to case. */
export const sameName = (a: string | null | undefined, b: string) => a != null && a.toLowerCase() === b.toLowerCase();
export const namesInclude = (names: string[], name: string | null | undefined) => names.some((n) => sameName(name, n));

export const orgKeys = {
  role: (id: string) => `role:${id}`,
  roleName: (name: string) => `role-name:${name.toLowerCase()}`,
  ring: (id: string) => `ring:${id}`,
  ringName: (name: string) => `ring-name:${name.toLowerCase()}`,
  fill: (id: string) => `fill:${id}`,
  fillPair: (roleId: string, identityId: string) => `fill-pair:${roleId}:${identityId}`,
};

export const orgIndexes = {
  roles: 'roles',
  rings: 'rings',
  fills: 'fills',
  /** members: identity ids filling the role */
  fillersOf: (roleId: string) => `fills:role:${roleId}`,
  /** members: role ids the identity fills */
  rolesOf: (identityId: string) => `roles:of:${identityId}`,
  /** members: ring ids the identity belongs to */
  ringsOf: (identityId: string) => `rings:of:${identityId}`,
};
