# gRPC server reflection: the descriptors of every file in proto/ (with its
# imports), made by protoc and embedded in the server by
# src/server/reflection_data.c (.incbin), so that grpcurl-style tools can
# list Kiln's services and read their messages.
$(GEN)/reflection.pb: $(PROTOS)
	@mkdir -p $(@D)
	protoc --proto_path=proto --include_imports --descriptor_set_out=$@.tmp \
		$(patsubst proto/%,%,$(PROTOS)) && mv $@.tmp $@

$(OUT)/obj/server/reflection_data.o build/fuzz/obj/server/reflection_data.o: $(GEN)/reflection.pb
