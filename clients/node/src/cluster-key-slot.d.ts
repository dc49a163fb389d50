// cluster-key-slot ships no type declarations: the one function this package uses.
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot (0-16383) of a key, hash tags included. */
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
