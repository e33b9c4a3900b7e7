# The online softmax's P rounding error, eager against lazy rescaling
# (kernels/attention/HISTORY.md, v9.10): random exp2-domain scores (std 1.45, about one nat as
# in the benchmark), bf16 V and bf16-rounded P, 64-key tiles, warps of 16 rows; relative L2 error of
# O against float64. Run: python3 softmax_rounding_sim.py
import numpy as np
def bf16(x):
    x=np.asarray(x,np.float32); b=x.view(np.uint32).astype(np.uint64)
    r=((b+0x7fff+((b>>16)&1))>>16)<<16
    return r.astype(np.uint32).view(np.float32)
L=512; d=64; rows=4096
sd=1.45
errs={}
for lazy in (False,True):
  rng=np.random.default_rng(1)
  num=0;den=0
  for rep in range(3):
      S=rng.normal(0,sd,(rows,L)).astype(np.float32)
      V=bf16(rng.normal(0,1,(L,d)))
      e=np.exp2((S-S.max(1,keepdims=True)).astype(np.float64)); exact=(e@V.astype(np.float64))/e.sum(1,keepdims=True)
      m=np.full(rows,-np.inf,np.float32); l=np.zeros(rows,np.float32); O=np.zeros((rows,d),np.float32)
      for t in range(0,L,64):
          s=S[:,t:t+64]; tm=s.max(1)
          g=(tm>m+8).reshape(-1,16).any(1).repeat(16) if lazy else np.ones(rows,bool)
          nm=np.where(g,np.maximum(m,tm),m)
          c=np.where(g, np.exp2(np.where(np.isinf(m),-np.inf,m-nm)),1).astype(np.float32)
          O=O*c[:,None]; l=l*c
          P=np.exp2(s-nm[:,None]).astype(np.float32)
          l=l+P.sum(1); O=O+bf16(P)@V[t:t+64]
          m=nm
      out=O/l[:,None]
      num+=((out-exact)**2).sum(); den+=(exact**2).sum()
  errs[lazy]=np.sqrt(num/den)
print(sd, errs, errs[True]/errs[False])
