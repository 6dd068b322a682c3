package contract
import ("testing";"time";"context";"strings";"fmt";"github.com/connecta-dev/connecta/guest")
func TestProbeMin(t *testing.T){ eng:=testEngine(t)
 full:=Prelude(testSecret)
 cut:=func(marker string) string { i:=strings.Index(full, marker); return full[:i]+"})(\"x\");" }
 pad:= "/*"+strings.Repeat("x",4000)+"*/"
 var sb strings.Builder; sb.WriteString("(()=>{"); for i:=0;i<200;i++ { fmt.Fprintf(&sb,"const q%d = %d;\n",i,i) }; sb.WriteString("})();")
 code:= sb.String()
 for _,c:=range []struct{n,p string}{{"none",""},{"comment4k",pad},{"stmts",code},{"a-capture",cut("const plain")},{"b-defs",cut("const fns")},{"c-wrap",cut("const namespace")},{"f-full",full}} {
   best:=time.Hour
   for i:=0;i<150;i++ { t0:=time.Now(); out,_:=eng.Run(context.Background(), guest.Program{Code:"async () => 1+1", Prelude:c.p, Providers: []guest.Provider{{Name: ProviderName, Functions: providerFunctions}}}, &scriptedHost{framer:newFramer(testSecret)}); if d:=time.Since(t0); d<best {best=d}; if out.Err!=nil {t.Fatal(out.Err)} }
   t.Log(c.n, len(c.p), best) } }
