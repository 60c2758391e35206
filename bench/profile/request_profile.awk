# llm_request_profile.sh's awk program from the operator article (seed 002),
# with one change: its variable `in` is renamed `inp`, because `in` is an
# awk keyword and the original does not run.
{
for(i=1;i<=NF;i++){
if($i ~ /^input_tokens=/){split($i,a,"="); inp=a[2]}
if($i ~ /^output_tokens=/){split($i,b,"="); out=b[2]}
}
print inp, out
}
