#!/usr/bin/env python3
"""Model check of the warp-specialized K/V ring protocol in sdpa_fp8.cu (no GPU needed).

Producer threads and compute threads are separate agents; mbarriers are modelled as in PTX
(expected count, pending count, phase; a parity wait on P returns once the phase with parity P
has completed, i.e. while the current phase's parity differs from P).  Each agent follows the
kernel's per-thread program:
  producer, tile j (slot s = j % NS, use u = j / NS): if j >= NS wait EMPTY(s) parity (u-1)&1;
           store its chunks of the slot; arrive FULL(s).
  consumer, tile j: wait FULL(s) parity u&1; read the slot; if j + NS < ntiles arrive EMPTY(s).
Random interleavings over ntiles 1..11, NUM_STAGES 2/3 and several thread counts check: no
deadlock, no read of a slot that does not hold tile j (RAW), no store into a slot that a consumer
is still reading (WAR).  Exit status 1 on any violation.
"""
import random
class MBar:
    def __init__(s, n): s.n=n; s.pending=n; s.phase=0
    def arrive(s):
        s.pending-=1
        assert s.pending>=0
        if s.pending==0: s.phase+=1; s.pending=s.n
    def done(s, parity): return (s.phase & 1) != parity  # phase 'parity' completed iff current phase parity differs
def sim(ntiles, NS, NP, NC, seed):
    rnd=random.Random(seed)
    full=[MBar(NP) for _ in range(NS)]; empty=[MBar(NC) for _ in range(NS)]
    slot_tile=[[None]*NP for _ in range(NS)]  # per producer-thread chunk: which tile is stored
    readers=[set() for _ in range(NS)]        # consumers currently reading slot
    # agent program counters
    prod=[dict(j=0,st='wait') for _ in range(NP)]
    cons=[dict(j=0,st='wait') for _ in range(NC)]
    steps=0
    while True:
        moves=[]
        for i,p in enumerate(prod):
            if p['j']<ntiles: moves.append(('p',i))
        for i,c in enumerate(cons):
            if c['j']<ntiles: moves.append(('c',i))
        if not moves: return steps
        rnd.shuffle(moves)
        progressed=False
        for kind,i in moves:
            if kind=='p':
                p=prod[i]; j=p['j']; s=j%NS; u=j//NS
                if p['st']=='wait':
                    if j<NS or empty[s].done((u-1)&1): p['st']='store'; progressed=True; break
                elif p['st']=='store':
                    assert not readers[s], f"WAR: producer {i} overwrote slot {s} (tile {j}) while read by {readers[s]}"
                    slot_tile[s][i]=j; p['st']='arrive'; progressed=True; break
                else:
                    full[s].arrive(); p['j']+=1; p['st']='wait'; progressed=True; break
            else:
                c=cons[i]; j=c['j']; s=j%NS; u=j//NS
                if c['st']=='wait':
                    if full[s].done(u&1): c['st']='read'; readers[s].add(i); progressed=True; break
                elif c['st']=='read':
                    assert all(t==j for t in slot_tile[s]), f"RAW: consumer {i} read slot {s} tile {slot_tile[s]} expected {j}"
                    c['st']='release'; progressed=True; break
                else:
                    readers[s].discard(i)
                    if j+NS<ntiles: empty[s].arrive()
                    c['j']+=1; c['st']='wait'; progressed=True; break
        if not progressed: raise RuntimeError(f"deadlock ntiles={ntiles} NS={NS}")
        steps+=1
n=0
for NS in (2,3):
  for NP in (1,2,3):
    for NC in (1,2,4):
      for ntiles in range(1,12):
        for seed in range(30):
          sim(ntiles,NS,NP,NC,seed); n+=1
print("ok", n, "runs")
